#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer binary (Fuzz/Package.swift) with ASan, runs every target
# for FUZZ_SECONDS, prints a table, and exits non-zero if any target crashed, hung or ran out
# of memory (the input that did it is kept and its path printed).
#
# Knobs: FUZZ_SECONDS=60 (per target)  FUZZ_TARGETS="config duration ..."  FUZZ_JOBS=1
#        FUZZ_FLAGS="..." (extra libFuzzer flags)  SWIFT=swift
# Everything generated lives in .build-fuzz/ (gitignored): the build, the working corpora
# (seeded from the committed Fuzz/corpus/NAME and kept between runs), artifacts and logs.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SWIFT=${SWIFT:-swift}
SECONDS_PER=${FUZZ_SECONDS:-60}
ALL="config duration sportdate statuspage economic alertmanager http-json exec-output feed page urlwatch opml"
TARGETS=${FUZZ_TARGETS:-$ALL}
OUT=$ROOT/.build-fuzz
WORK=$OUT/corpus-work
ART=$OUT/artifacts
LOGS=$OUT/logs

# Longest input per target: duration strings are short; documents and configs a few KiB.
max_len() { case $1 in duration) echo 64 ;; *) echo 4096 ;; esac; }
# Token dictionaries (Fuzz/dict): JSON syntax and field names, TOML syntax and config keys.
dict() { case $1 in config) echo Fuzz/dict/toml.dict ;; duration) ;; feed|opml) echo Fuzz/dict/xml.dict ;; urlwatch) echo Fuzz/dict/yaml.dict ;; page) echo Fuzz/dict/html.dict ;; *) echo Fuzz/dict/json.dict ;; esac; }

mkdir -p "$WORK" "$ART" "$LOGS"
echo "== building the fuzz binary (debug, -sanitize=fuzzer,address; the first build takes minutes)"
BUILD=("$SWIFT" build --package-path Fuzz --scratch-path "$OUT" -c debug -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library)
# The log is long (dependencies' warnings; ld.gold's harmless "Cannot export local symbol" per module).
if ! "${BUILD[@]}" >"$LOGS/build.log" 2>&1; then
    grep -v "Cannot export local symbol" "$LOGS/build.log" | grep -E "error" | head -20
    echo "fuzz build failed (log: ${LOGS#$ROOT/}/build.log)"
    exit 1
fi
grep "Build complete" "$LOGS/build.log"
BIN=$("${BUILD[@]}" --show-bin-path)/TidingsFuzz
rows=()
failed=0
for t in $TARGETS; do
    [ -d "Fuzz/corpus/$t" ] || { echo "unknown target $t (known: $ALL)"; exit 2; }
    mkdir -p "$WORK/$t" "$ART/$t"
    rm -f "$ART/$t"/*
    log=$LOGS/$t.log
    echo "== $t: ${SECONDS_PER}s (log: ${log#$ROOT/})"
    dict_file=$(dict "$t")
    start=$(date +%s)
    # detect_leaks=0 (ASan at exit, libFuzzer per input): Foundation's caches (DateFormatter, the
    # Swift runtime) read as leaks; leaks are not what this hunts. -timeout: one input taking 10 s
    # under ASan is a hang (timeout-* artifact); -report_slow_units: over 2 s is listed as slow.
    # SWIFT_BACKTRACE=enable=no: the Swift runtime's crash backtracer itself trips ASan, hiding the real error.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} FUZZ_TARGET=$t "$BIN" "$WORK/$t" "Fuzz/corpus/$t" \
        -max_total_time="$SECONDS_PER" -max_len="$(max_len "$t")" -timeout=10 -rss_limit_mb=2048 \
        -report_slow_units=2 -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$ART/$t/" \
        ${dict_file:+-dict="$dict_file"} ${FUZZ_FLAGS:-} >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
    execs=$(stat number_of_executed_units)
    eps=$(stat average_exec_per_sec)
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
    corpus=$(ls "$WORK/$t" | wc -l)
    bad=$(ls "$ART/$t" | grep -cE '^(crash|timeout|oom|leak)-')
    slow=$(ls "$ART/$t" | grep -c '^slow-unit-')
    rows+=("$t|$secs|${execs:-?}|${eps:-?}|${cov:-?}|${ft:-?}|$corpus|$bad|$slow")
    if [ "$bad" != 0 ] || { [ "$rc" != 0 ] && [ -z "$execs" ]; }; then
        failed=1
        echo "   !! $t failed (exit $rc):"
        ls "$ART/$t"/* 2>/dev/null | grep -E '/(crash|timeout|oom|leak)-' | sed 's/^/      /'
        grep -m1 -E 'ERROR: |Fatal error|deadly signal' "$log" | sed 's/^/      /'
    fi
done

echo
echo "== fuzz results ($(uname -m), $(nproc) cores, $("$SWIFT" --version 2>/dev/null | head -1 | sed 's/ (.*//'))"
printf '%-13s %5s %10s %7s %6s %6s %7s %8s %5s\n' target secs execs exec/s cov ft corpus crashes slow
for r in "${rows[@]}"; do
    IFS='|' read -r t secs execs eps cov ft corpus bad slow <<<"$r"
    printf '%-13s %5s %10s %7s %6s %6s %7s %8s %5s\n' "$t" "$secs" "$execs" "$eps" "$cov" "$ft" "$corpus" "$bad" "$slow"
done
echo "(crashes = crash/timeout/oom artifacts; slow = single inputs over 2 s; artifacts in .build-fuzz/artifacts/TARGET/)"
exit $failed
