#!/usr/bin/env bash
# `make bench`: installs what the benchmarks need (Debian packages), builds tidings and
# tidings-bench in release mode (and the installed binary, `make release`), and runs
# bench/bench.py (which prints the table).
# Everything runs on loopback; urlwatch comes from PyPI into a throwaway venv; benchmark 5 starts
# its own PostgreSQL (Debian's binaries) in a temp dir.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
PYTHON=${PYTHON:-/usr/bin/python3}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)

pkgs="libsqlite3-dev libnotify-dev libcurl4-openssl-dev libssl-dev libpq-dev pkg-config nginx hyperfine time python3-venv procps postgresql dbus"
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
if [ -n "$missing" ]; then
  echo "installing:" $missing >&2
  $SUDO apt-get update -qq
  # (The benchmarks start their own nginx on a free loopback port; a system one is not used.)
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
fi

# The binary `make install` installs (static, stripped: .build/install/tidings), for benchmark
# 7's size and footprint; then the dynamic release build the other benchmarks have always run.
# (The static build has its own build folder, .build-static, so neither recompiles the other.)
echo "building the installed binary (make release)…" >&2
"${MAKE:-make}" --no-print-directory release SWIFT="$SWIFT" >&2
echo "building tidings and tidings-bench (release)…" >&2
$SWIFT build -c release --product tidings >&2
$SWIFT build -c release --product tidings-bench >&2

exec "$PYTHON" bench/bench.py --bin .build/release/tidings --bench-bin .build/release/tidings-bench "$@"
