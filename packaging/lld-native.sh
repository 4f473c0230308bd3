#!/usr/bin/env bash
# packaging/lld-native.sh: the release build's linker (Package.swift: -use-ld=THIS), lld without
# corelibs Foundation. Every module importing TOMLKit (which imports Foundation) autolinks
# -lFoundation, -lFoundationInternationalization, -lCoreFoundation and -l_FoundationICU, and
# swift-autolink-extract lists -lFoundation before -lFoundationEssentials. GNU ld extracts nothing
# from them (nothing of ours references corelibs Foundation: DESIGN §15, Tests/guards/native.py),
# but lld takes a symbol from the first archive on the line that defines it: FoundationEssentials'
# Data+Base64 needs a specialization that libFoundation.a(NSString.swift.o) also defines, and
# that one member brings corelibs Foundation, CoreFoundation and ICU's 34 MB of data (a 132 MB
# binary instead of 84). So those four libraries are dropped from the link: a reference to
# them is an undefined-symbol error naming the object, as it should be (issue 31).
# clang hands the arguments over in a response file (@FILE, quoted words): filtered into a copy.
set -euo pipefail
drop='-lFoundation|-lFoundationInternationalization|-lCoreFoundation|-l_FoundationICU'
tmp=()
trap 'rm -f "${tmp[@]}"' EXIT
args=()
for a in "$@"; do
  case "$a" in
    -lFoundation|-lFoundationInternationalization|-lCoreFoundation|-l_FoundationICU) ;;
    @*)
      f=$(mktemp)
      tmp+=("$f")
      sed -E "s/\"($drop)\"( |$)//g" "${a#@}" >"$f"
      args+=("@$f")
      ;;
    *) args+=("$a") ;;
  esac
done
# The toolchain's lld, beside the clang that runs this script (PATH may lack the toolchain).
lld=$(dirname "$(readlink -f "/proc/$PPID/exe")")/ld.lld
[ -x "$lld" ] || lld=$(command -v ld.lld)
"$lld" "${args[@]}"
