#!/usr/bin/env python3
"""Which pages of the tidings binary an idle daemon holds resident, by ELF section.

    packaging/text-residency.py BINARY [SECONDS]

Runs `BINARY run` on a copy of the shipped etc/ and plugins.d/ for SECONDS (default 5), reads
/proc/PID/maps and /proc/PID/pagemap (needs root or CAP_SYS_ADMIN for the present bit; hrun is
root) and prints per ELF section (readelf -S) the pages mapped, resident, and the VmRSS / Pss of
the process; then `BINARY --version`'s peak RSS. Used for issue 31's text-segment figures
(docs/engineering/benchmarks.md)."""
import os, shutil, struct, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.sysconf("SC_PAGE_SIZE")


def shipped_config(d):
    """A copy of the shipped etc/ and plugins.d/ in d (as bench.py's footprint benchmark makes
    it); returns the path of its tidings.toml."""
    os.makedirs(os.path.join(d, "etc"))
    shutil.copy(os.path.join(ROOT, "etc", "tidings.toml"), os.path.join(d, "etc"))
    shutil.copytree(os.path.join(ROOT, "plugins.d"), os.path.join(d, "plugins.d"))
    for x in os.listdir(os.path.join(d, "plugins.d", "secrets")):
        os.chmod(os.path.join(d, "plugins.d", "secrets", x), 0o600)  # as a copy in use must be
    return os.path.join(d, "etc", "tidings.toml")


def sections(binary):
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    res = []
    for line in out.splitlines():
        line = line.replace("[ ", "[")
        parts = line.split()
        if len(parts) > 6 and parts[0].startswith("[") and parts[0] != "[Nr]":
            name, addr, size = parts[1], int(parts[3], 16), int(parts[5], 16)
            if addr and size:
                res.append((name, addr, size))
    return res


def resident_pages(pid, binary):
    """Virtual addresses (relative to the load base) of the binary's resident pages."""
    real = os.path.realpath(binary)
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            p = line.split()
            if len(p) > 5 and os.path.realpath(p[5]) == real:
                lo, hi = (int(x, 16) for x in p[0].split("-"))
                maps.append((lo, hi, int(p[2], 16)))
    base = min(lo - off for lo, hi, off in maps)
    pages = set()
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        for lo, hi, _ in maps:
            pm.seek(lo // PAGE * 8)
            data = pm.read((hi - lo) // PAGE * 8)
            for i in range((hi - lo) // PAGE):
                (entry,) = struct.unpack_from("<Q", data, i * 8)
                if entry & (1 << 63) or entry & (1 << 62):
                    pages.add(lo - base + i * PAGE)
    return pages


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])


def pss(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])


def main():
    binary = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    d = tempfile.mkdtemp(prefix="tidings-residency-")
    p = subprocess.Popen([binary, "run", "--config", shipped_config(d), "--state-dir", os.path.join(d, "state")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "daemon.log"), "w"))
    try:
        time.sleep(seconds)
        if p.poll() is not None:
            sys.exit(f"the daemon exited {p.returncode}; see {d}/daemon.log")
        pages = resident_pages(p.pid, binary)
        rss, hwm, ps = status(p.pid, "VmRSS"), status(p.pid, "VmHWM"), pss(p.pid)
    finally:
        p.terminate()
        p.wait()
    print(f"{'section':28} {'KiB':>8} {'resident KiB':>13}")
    total = 0
    for name, addr, size in sections(binary):
        first, last = addr // PAGE * PAGE, (addr + size - 1) // PAGE * PAGE
        n = sum(1 for a in range(first, last + PAGE, PAGE) if a in pages)
        total += n
        if size >= 64 * 1024 or n:
            print(f"{name:28} {size // 1024:>8} {n * PAGE // 1024:>13}")
    print(f"binary resident {len(pages) * PAGE // 1024} KiB (section sum, shared pages twice: {total * PAGE // 1024})")
    print(f"idle daemon VmRSS {rss} KiB, VmHWM {hwm} KiB, Pss {ps} KiB")
    v = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--version"], capture_output=True, text=True)
    print(f"--version max RSS {v.stderr.strip().splitlines()[-1]} KiB")
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
