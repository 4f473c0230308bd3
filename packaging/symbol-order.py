#!/usr/bin/env python3
"""Writes OUT, the release link's symbol ordering file (lld `--symbol-ordering-file`, set in
Package.swift; `make text-order` writes packaging/text-order.txt): the functions that start-up,
`check` and the idle daemon run, so that they sit together at the start of .text and the kernel's
fault-around (64 KiB a fault) brings in code that runs instead of neighbours that do not (issue 31).

    packaging/symbol-order.py UNSTRIPPED_BINARY OUT [SECONDS]   # inside hrun; needs valgrind, nginx, objcopy, nm

Profiles (valgrind --tool=callgrind), in this order: `--version`; `check -q` twice over 20
http-json sources (benchmark 1's: the first fills the state, the second finds them unchanged,
HTTP 304), twice over 5 feeds and 5 pages (benchmark 6's), all served by nginx on loopback
(bench/bench.py's helpers); `run` on a copy of the shipped etc/ and plugins.d/ for SECONDS
(default 20), then SIGTERM. Writes every function with a cost that the binary defines, run by
run (those new to each run sorted by name), one name a line: first those compiled with -function-sections (ours and the
packages', a section each, so each moves alone), then those of the prebuilt Swift runtime and
FoundationEssentials (their archives hold whole-object .text sections: listing one of those
moves its object's whole .text, so they go after the code that moves function by function, and
a name the binary defines more than once, a local helper of many objects, is left out for them).

The result depends on the code, not the machine or the clock, up to the daemon's timing (which
idle wake-ups SECONDS holds). Names the binary no longer has are skipped by lld
(--no-warn-symbol-ordering): a stale file costs resident memory, never correctness; regenerate
after large changes (docs/engineering/benchmarks.md, "the ordered release link")."""
import glob, importlib.util, os, shutil, signal, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


residency = load("text_residency", os.path.join(HERE, "text-residency.py"))
bench = load("bench", os.path.join(os.path.dirname(HERE), "bench", "bench.py"))
# The prebuilt archives of the static Swift runtime (whole-object .text sections).
RUNTIME_ARCHIVES = "/opt/swift/usr/lib/swift_static/linux/*.a"


def profile(cmd, out, seconds=None):
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                          f"--callgrind-out-file={out}", *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if seconds is not None:
        time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
    return p.wait(timeout=600)


def functions(path):
    """Function names in a callgrind file, in order of appearance (name compression: fn=(id) name)."""
    order = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("fn=(", "cfn=(")):
                head, _, name = line.rstrip("\n").partition(") ")
                if name and not name.startswith("0x"):
                    order.append(name)
    return order


def defined(path):
    """Name -> how many definitions (local symbols of the same name in several objects count apart)."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True).stdout
    counts = {}
    for p in (line.split() for line in out.splitlines()):
        if len(p) >= 2:
            counts[p[-1]] = counts.get(p[-1], 0) + 1
    return counts


def main():
    binary = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    d = tempfile.mkdtemp(prefix="tidings-order-")
    nginx = None
    try:
        # valgrind's DWARF reader stops at the release build's DWARF 5: profile a copy without it
        # (the symbol table is enough to name functions).
        plain = os.path.join(d, "tidings")
        subprocess.run(["objcopy", "--strip-debug", binary, plain], check=True)
        nginx = bench.Nginx(d, 20)
        bench.watch_files(nginx)
        nginx.start()
        json_args = bench.tidings_config(os.path.join(d, "json"), nginx, 20)
        watch_args = bench.watch_tidings_config(
            os.path.join(d, "watch"), nginx, [(f"feed{i}", f"feed{i}.xml") for i in range(5)],
            [(f"page{i}", f"page{i}.html") for i in range(5)])
        runs = [([plain, "--version"], None)]
        for args in (json_args, json_args, watch_args, watch_args):
            runs.append(([plain, "check", "-q", *args], None))
        config = residency.shipped_config(os.path.join(d, "shipped"))
        runs.append(([plain, "run", "--config", config, "--state-dir", os.path.join(d, "state")], seconds))
        names = []
        for i, (cmd, secs) in enumerate(runs):
            rc = profile(cmd, os.path.join(d, f"{i}.out"), secs)
            got = functions(os.path.join(d, f"{i}.out"))
            print(f"{' '.join(cmd[1:3])}: exit {rc}, {len(set(got))} functions")
            # Sorted by name within a run: callgrind's order follows the layout of the binary
            # profiled, so this keeps the file the same from one profile to the next (and
            # mangled names sort by module and type, neighbours in the code too).
            names += sorted(set(got) - set(names))
    finally:
        if nginx:
            nginx.stop()
    ours = defined(plain)
    runtime = set()
    for a in glob.glob(RUNTIME_ARCHIVES):
        runtime |= defined(a).keys()
    seen, first, last = set(), [], []
    for n in names:
        if n in ours and n not in seen:
            seen.add(n)
            if n not in runtime:
                first.append(n)
            # lld moves every section that defines the name: a local helper that many objects
            # define (__swift_instantiateConcreteTypeFromMangledName, a specialization) would
            # bring whole runtime objects' .text along (_RegexParser.o's 476 KB, never run).
            elif ours[n] == 1:
                last.append(n)
    with open(out, "w") as f:
        f.write("".join(f"{n}\n" for n in first + last))
    print(f"{len(first)} + {len(last)} (runtime) functions -> {out}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
