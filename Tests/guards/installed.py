#!/usr/bin/env python3
"""The installed binary's guard (issue 31 items 1 and 7, DESIGN §15), run by `make test-install` on
the release binary `make install` installs (its symbols read from BINARY.debug beside it, which
packaging/split-debug.sh keeps, else from BINARY itself):

- it does not link the libraries loaded at first use (libcurl, libxml2, libnotify, GLib/GIO, gdk-pixbuf,
  libpq, libsqlite3, libyaml, libcrypto and libssl):
  none of them is a DT_NEEDED entry, so a command that does not use them never maps them;
- with --native: it holds no ICU data (a symbol `icudtNN_dat`: corelibs Foundation's
  FoundationInternationalization brings it, 30+ MB) and no BoringSSL (symbols of swift-crypto's
  CCryptoBoringSSL or NIOSSL's CNIOBoringSSL: OpenSSL, which libcurl loads, is the one TLS stack).

    installed.py [--native] BINARY

Fails naming each finding: the library, or the symbols (how many, their bytes, a few names).
"""
import pathlib
import re
import subprocess
import sys

# Loaded with dlopen by CCurl, CLibXML2, CLibnotify, CLibPQ, CSQLite, CYAML and CLibCrypto
# (docs/development.md); libssl only ever comes with libcurl.
LAZY = re.compile(r"^lib(curl|xml2|notify|gio-2\.0|gobject-2\.0|glib-2\.0|gdk_pixbuf-2\.0|gmodule-2\.0|pq|sqlite3|yaml-0|crypto|ssl)\.so")
ICU_DATA = re.compile(r"^icudt\d+_dat$")
BORINGSSL = re.compile(r"CCryptoBoringSSL|CNIOBoringSSL|boringssl", re.IGNORECASE)


def needed(binary: pathlib.Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", "-W", str(binary)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def symbols(path: pathlib.Path) -> list[tuple[str, int]]:
    """(name, size) of every symbol of the symbol table; size 0 where nm gives none."""
    out = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4:
            found.append((parts[3], int(parts[1], 16)))
        elif len(parts) == 3:
            found.append((parts[2], 0))
    return found


def summary(what: str, hits: list[tuple[str, int]]) -> str:
    size = sum(s for _, s in hits)
    names = ", ".join(n for n, _ in sorted(hits, key=lambda h: -h[1])[:5])
    return f"{what}: {len(hits)} symbols, {size / 1e6:.1f} MB (largest: {names})"


def main() -> int:
    args = sys.argv[1:]
    native = "--native" in args
    paths = [a for a in args if a != "--native"]
    if len(paths) != 1:
        print("usage: installed.py [--native] BINARY", file=sys.stderr)
        return 64
    binary = pathlib.Path(paths[0])
    if not binary.is_file():
        print(f"installed guard: {binary}: no such file (make release first)", file=sys.stderr)
        return 1
    failures = [f"{binary} links {lib}, which is loaded at first use (dlopen): a command that does not use it must not map it"
                for lib in needed(binary) if LAZY.match(lib)]
    checked = ["no DT_NEEDED on libcurl, libxml2, libnotify, GLib, libpq, libsqlite3, libyaml or libcrypto"]
    if native:
        debug = binary.with_name(binary.name + ".debug")
        table = symbols(debug if debug.is_file() else binary)
        if not table:
            failures.append(f"{binary}: no symbol table to check (stripped, and no {debug.name} beside it)")
        icu = [(n, s) for n, s in table if ICU_DATA.match(n)]
        boring = [(n, s) for n, s in table if BORINGSSL.search(n)]
        if icu:
            failures.append(summary(f"{binary} holds ICU data (corelibs Foundation's FoundationInternationalization)", icu))
        if boring:
            failures.append(summary(f"{binary} holds BoringSSL (swift-crypto or NIOSSL; OpenSSL is the one TLS stack)", boring))
        checked.append("no ICU data, no BoringSSL")
    if failures:
        print("installed guard (issue 31, DESIGN §15):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"installed guard: {binary}: " + "; ".join(checked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
