#!/usr/bin/env python3
"""The native guard (issue 31 item 1, DESIGN §15): no object of the listed modules references
swift-corelibs-foundation. One call into it (a `trimmingCharacters`, a `String.contains` that binds
to Foundation's overload, an `NSLock`) links libFoundation, CoreFoundation and ICU (34 MB of data)
into the static binary; FoundationEssentials is fine.

    native.py BUILD_DIR MODULE...

Reads the undefined symbols of BUILD_DIR/MODULE.build/*.o (`nm -u`), keeps those of the corelibs
modules (Foundation, FoundationInternationalization, FoundationNetworking, FoundationXML), and
fails naming the module, the source file (one object per Swift file) and each symbol, demangled.
The module list grows as modules move to FoundationEssentials; when it holds them all, the whole
product is guarded.
"""
import pathlib
import re
import subprocess
import sys

# Mangled module names: length + name (Swift's mangling). `19FoundationEssentials` is allowed.
CORELIBS = re.compile(r"(?<![0-9])(10Foundation|30FoundationInternationalization|20FoundationNetworking|13FoundationXML)")


def undefined(obj: pathlib.Path) -> list[str]:
    out = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def demangle(symbols: list[str]) -> list[str]:
    if not symbols:
        return []
    r = subprocess.run(["swift", "demangle", "--compact"], input="\n".join(symbols), capture_output=True, text=True)
    lines = r.stdout.splitlines()
    return lines if r.returncode == 0 and len(lines) == len(symbols) else symbols


def source_of(module: str, obj: pathlib.Path, root: pathlib.Path) -> str:
    name = obj.name.removesuffix(".o")
    found = sorted((root / "Sources" / module).rglob(name))
    return str(found[0].relative_to(root)) if found else f"{module}/{name}"


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: native.py BUILD_DIR MODULE...", file=sys.stderr)
        return 64
    build = pathlib.Path(sys.argv[1])
    root = pathlib.Path(__file__).resolve().parents[2]
    failures = []
    for module in sys.argv[2:]:
        objects = sorted((build / f"{module}.build").glob("*.o"))
        if not objects:
            failures.append(f"{module}: no objects in {build}/{module}.build (not built?)")
            continue
        for obj in objects:
            bad = [s for s in undefined(obj) if CORELIBS.search(s)]
            for symbol in demangle(bad):
                failures.append(f"{source_of(module, obj, root)} ({module}) references corelibs Foundation: {symbol}")
    if failures:
        print("native guard: these modules must not call into swift-corelibs-foundation (it links ICU);"
              " use FoundationEssentials or the stdlib (docs/development.md):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"native guard: {len(sys.argv) - 2} modules reference no corelibs Foundation ({' '.join(sys.argv[2:])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
