#!/usr/bin/env python3
"""Writes OUT, a symbol ordering file for lld (`-Xlinker --symbol-ordering-file=OUT`): the
functions an idle daemon runs (`--version`, then start-up and SECONDS of doing nothing on the
shipped etc/), so that they can sit together in .text and the kernel's fault-around (64 KiB a
fault) brings in code that runs instead of neighbours that do not (issue 31).

    packaging/symbol-order.py UNSTRIPPED_BINARY OUT [SECONDS]   # inside hrun; needs valgrind, objcopy, nm

Profile: valgrind --tool=callgrind on each run (the daemon gets SIGTERM after SECONDS, default
20), then every function with a cost that the binary defines, in first-seen order, one name a
line. Stale names are harmless (lld skips them with --no-warn-symbol-ordering); regenerate after
large changes. Not used by `make release` yet: gold (the default linker) ignores
--section-ordering-file for these objects, and most Swift functions sit in one `.text` per object
unless compiled with -function-sections (docs/engineering/benchmarks.md, "Issue 31: the binary's
own text")."""
import importlib.util, os, re, shutil, signal, subprocess, sys, tempfile, time

_spec = importlib.util.spec_from_file_location(
    "text_residency", os.path.join(os.path.dirname(os.path.abspath(__file__)), "text-residency.py"))
residency = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(residency)


def profile(cmd, out, seconds=None):
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                          f"--callgrind-out-file={out}", *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if seconds is not None:
        time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
    p.wait(timeout=300)


def functions(path):
    """Function names in a callgrind file, in order of appearance (name compression: fn=(id) name)."""
    names, order = {}, []
    pat = re.compile(r"^(?:fn|cfn)=\((\d+)\)(?: (.*))?$")
    with open(path, errors="replace") as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if m:
                key, name = m.group(1), m.group(2)
                if name is not None:
                    names[key] = name
                    order.append(name)
    seen, res = set(), []
    for n in order:
        if n not in seen and not n.startswith("0x"):
            seen.add(n)
            res.append(n)
    return res


def main():
    binary = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    d = tempfile.mkdtemp(prefix="tidings-order-")
    config = residency.shipped_config(d)
    # valgrind's DWARF reader stops at the release build's DWARF 5: profile a copy without it
    # (the symbol table is enough to name functions).
    plain = os.path.join(d, "tidings")
    subprocess.run(["objcopy", "--strip-debug", binary, plain], check=True)
    binary = plain
    profile([binary, "--version"], os.path.join(d, "version.out"))
    profile([binary, "run", "--config", config, "--state-dir", os.path.join(d, "state")], os.path.join(d, "run.out"), seconds)
    ours = set(subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                              check=True).stdout.split())
    names, seen = [], set()
    for f in ("version.out", "run.out"):
        for n in functions(os.path.join(d, f)):
            if n in ours and n not in seen:
                seen.add(n)
                names.append(n)
    with open(out, "w") as f:
        f.write("".join(f"{n}\n" for n in names))
    print(f"{len(names)} functions -> {out}")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
