#!/usr/bin/env python3
"""The native guard (issue 31 item 1, DESIGN §15): no object of the listed modules references
swift-corelibs-foundation. One call into it (a `trimmingCharacters`, a `String.contains` that binds
to Foundation's overload, an `NSLock`) links libFoundation, CoreFoundation and ICU (34 MB of data)
into the static binary; FoundationEssentials is fine.

    native.py BUILD_DIR [--product NAME] MODULE...

Reads the undefined symbols of BUILD_DIR/MODULE.build/*.o (`nm -u`), keeps those of the corelibs
modules (Foundation, FoundationInternationalization, FoundationNetworking, FoundationXML), and
fails naming the module, the source file (one object per Swift file) and each symbol, demangled.
The module list holds every module of ours in the product. With `--product NAME`, the linked
debug executable BUILD_DIR/NAME is checked too: its undefined symbols are what every object in it
(ours and the packages' we depend on) needs from shared libraries, so a corelibs symbol there is a
call that would link libFoundation and ICU into the static binary, wherever it comes from; the
failure names the objects (`BUILD_DIR/*.build/*.o`) that reference it.
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


def product_failures(build: pathlib.Path, product: str) -> list[str]:
    binary = build / product
    if not binary.exists():
        return [f"{product}: {binary} not built"]
    bad = sorted({s for s in undefined(binary) if CORELIBS.search(s)})
    if not bad:
        return []
    wanted = set(bad)
    users: dict[str, list[str]] = {s: [] for s in bad}
    # Objects of the product's modules first; test targets' objects are not in the product.
    objects = [o for o in build.glob("*.build/*.o") if not o.parent.name.removesuffix(".build").endswith(("Tests", "TestSupport"))]
    objects.sort(key=lambda o: (not o.parent.name.lower().startswith("tidings"), str(o)))
    for obj in objects:
        for s in set(undefined(obj)) & wanted:
            users[s].append(f"{obj.parent.name.removesuffix('.build')}/{obj.name}")
    return [f"the product {product} references corelibs Foundation: {name} (from {', '.join(users[s][:4]) or 'an object not in the build folder'})"
            for s, name in zip(bad, demangle(bad))]


def main() -> int:
    args = sys.argv[1:]
    product = None
    if len(args) >= 2 and args[1] == "--product":
        product = args[2] if len(args) > 2 else None
        args = args[:1] + args[3:]
    if len(args) < 2 or (product is None and "--product" in sys.argv):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: native.py BUILD_DIR [--product NAME] MODULE...", file=sys.stderr)
        return 64
    build = pathlib.Path(args[0])
    modules = args[1:]
    root = pathlib.Path(__file__).resolve().parents[2]
    failures = []
    for module in modules:
        objects = sorted((build / f"{module}.build").glob("*.o"))
        if not objects:
            failures.append(f"{module}: no objects in {build}/{module}.build (not built?)")
            continue
        for obj in objects:
            bad = [s for s in undefined(obj) if CORELIBS.search(s)]
            for symbol in demangle(bad):
                failures.append(f"{source_of(module, obj, root)} ({module}) references corelibs Foundation: {symbol}")
    if product:
        failures += product_failures(build, product)
    if failures:
        print("native guard: these modules must not call into swift-corelibs-foundation (it links ICU);"
              " use FoundationEssentials or the stdlib (docs/development.md):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    also = f"; nor does the linked {product}, dependencies included" if product else ""
    print(f"native guard: {len(modules)} modules reference no corelibs Foundation ({' '.join(modules)}){also}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
