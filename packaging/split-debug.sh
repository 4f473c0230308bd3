#!/usr/bin/env bash
# packaging/split-debug.sh IN OUT: OUT is IN stripped (no symbol table, no debug sections, no
# .comment), with a .gnu_debuglink to OUT.debug, which holds IN's debug sections and symbols
# (objcopy --only-keep-debug), as Debian's dh_strip splits a binary and its -dbgsym package.
# gdb, perf and eu-stack find OUT.debug beside OUT, or by build id under
# /usr/lib/debug/.build-id/ (where `make deb`'s tidings-dbgsym package puts it).
set -euo pipefail
in=$1 out=$2
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
objcopy --only-keep-debug --compress-debug-sections=zlib "$in" "$out.debug"
chmod 0644 "$out.debug"
# --add-gnu-debuglink names the file without its directory (and its CRC): it is looked up
# beside the binary, in a .debug/ beside it, and under /usr/lib/debug/DIR-OF-BINARY/.
objcopy --strip-all --remove-section=.comment --remove-section=.note \
  --add-gnu-debuglink="$out.debug" "$in" "$tmp"
chmod 0755 "$tmp"
mv "$tmp" "$out"
trap - EXIT
