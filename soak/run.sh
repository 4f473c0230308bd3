#!/usr/bin/env bash
# `make soak`: builds tidings in release mode and runs soak/soak.py (prints the table).
# The system packages it needs (dbus, python3-dbusmock) come from `make test-deps`.
# Everything runs on loopback; the disk phase mounts a tmpfs (root; skipped otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
PYTHON=${PYTHON:-/usr/bin/python3}

echo "building tidings (release)…" >&2
$SWIFT build -c release --product tidings >&2

exec "$PYTHON" soak/soak.py --bin .build/release/tidings "$@"
