# tidings: the two commands a newcomer needs are `make run` and `make test`.

SWIFT        ?= swift
PYTHON       ?= /usr/bin/python3
BIN          := .build/debug/tidings
STATE_DIR    ?= .state

# Needed to build (GRDB links SQLite; the desktop sink links libnotify; HTTP is libcurl).
BUILD_PACKAGES := libsqlite3-dev libnotify-dev libcurl4-openssl-dev pkg-config
# Needed by the test suite: real session bus + notification server, real Alertmanager.
TEST_PACKAGES  := python3 python3-pytest python3-dbusmock dbus dbus-x11 libnotify-bin \
                  prometheus-alertmanager dunst xvfb

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build run test unit e2e deps test-deps clean bench fuzz soak

all: build

# Installs Debian packages that are missing (and only those).
define apt_install
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(BUILD_PACKAGES))

test-deps: deps
	$(call apt_install,$(TEST_PACKAGES))

build: deps
	$(SWIFT) build

# Runs the daemon in the foreground on the shipped etc/ and plugins.d/, state in ./.state.
run: build
	$(BIN) run --config etc/tidings.toml --state-dir $(STATE_DIR)

# The whole suite: Swift unit tests, then the end-to-end tests against the built binary.
test: test-deps build unit e2e

unit:
	$(SWIFT) test

e2e:
	cd Tests/e2e && TIDINGS_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q

# Benchmarks (issue 5): loopback only, release build, prints a short table. Not part of `make test`.
# Knobs: BENCH_N="200 1000" BENCH_RUNS=7 BENCH_DAEMON_SECONDS=135 BENCH_ONLY="1 2 3 4" (see bench/bench.py).
bench:
	SWIFT=$(SWIFT) PYTHON=$(PYTHON) bench/run.sh

# Fuzzing (issue 5): libFuzzer + AddressSanitizer over the config loader, the duration parser and
# every provider's response decoder; FUZZ_SECONDS per target (default 60, about 10 minutes in all),
# then a table. Fails if any target crashed; the input is kept. A separate package (Fuzz/) built
# into .build-fuzz, so `make build` / `make test` are untouched. Knobs: see Fuzz/run.sh.
fuzz: deps
	SWIFT=$(SWIFT) Fuzz/run.sh

# Reliability soak (issue 5): faults injected on loopback, ~10 minutes, release build, prints a
# table; exits non-zero on any lost or duplicated event. Not part of `make test`.
# Knobs: SOAK_ONLY="provider sink crash disk" SOAK_PROVIDER_SECONDS=120 SOAK_SINK_SECONDS=120
# SOAK_KILLS=50 SOAK_DISK_SECONDS=15 SOAK_SEED=N SOAK_KEEP=1 (see soak/soak.py).
soak: test-deps
	SWIFT=$(SWIFT) PYTHON=$(PYTHON) soak/run.sh

clean:
	rm -rf .build $(STATE_DIR)
