# tidings: the two commands a newcomer needs are `make run` and `make test`.

SWIFT        ?= swift
PYTHON       ?= /usr/bin/python3
# The e2e tests' python: Debian's (pytest, dbusmock) plus the PyPI test helpers pinned in
# Tests/e2e/requirements.txt (Synapse, aiosmtpd, apprise), in a venv made by `make test-venv`.
TEST_VENV    := .venv
TEST_PYTHON  := $(TEST_VENV)/bin/python
BIN          := .build/debug/tidings
# The debug build for `make run` and `make test` keeps line tables, not full debug info: a
# backtrace still names file and line, and the build and its link are much faster.
DEBUG_FLAGS  ?= -Xswiftc -gline-tables-only
STATE_DIR    ?= .state

# Needed to build (the state is SQLite's C API; libnotify, libxml2 and libcurl give their headers and
# are loaded at first use, DESIGN §15; SHA-256, HMAC and random bytes come from OpenSSL's libcrypto,
# the one libcurl loads; `import urlwatch` reads YAML with libyaml; python3 makes
# tidings.toml(5) from docs/; binutils' objcopy strips the release binary).
BUILD_PACKAGES := libsqlite3-dev libnotify-dev libcurl4-openssl-dev libxml2-dev libssl-dev libyaml-dev libpq-dev pkg-config python3 binutils
# Needed by the test suite: real session bus + notification server, real Alertmanager, real
# Prometheus and promtool; for the install tests: systemd-analyze, man, bash completion, the
# Debian package tools, lintian; PostgreSQL (and openssl, for the sslmode tests' certificates)
# for the shared-state tests (they start their own server with initdb/pg_ctl in a temp dir on a
# loopback port; the cluster Debian's package may create is not used); chromium (headless, driven
# over its DevTools protocol) for the status page's browser tests; newsboat, a feed reader that
# imports `tidings export opml` and exports OPML for `tidings import opml` (test_import.py).
TEST_PACKAGES  := python3 python3-pytest python3-venv python3-dbusmock dbus dbus-x11 libnotify-bin \
                  prometheus-alertmanager prometheus dunst xvfb \
                  systemd man-db bash-completion dpkg-dev lintian postgresql openssl gcc libc6-dev chromium \
                  dovecot-imapd newsboat
# Needed by `make deb` (dpkg-shlibdeps, dpkg-gencontrol, dpkg-deb, strip).
DEB_PACKAGES   := dpkg-dev binutils

# Where `make install` puts things (DESIGN §8): make install PREFIX=/usr DESTDIR=/tmp/root
PREFIX      ?= /usr/local
DESTDIR     ?=
bindir      := $(PREFIX)/bin
mandir      := $(PREFIX)/share/man
docdir      := $(PREFIX)/share/doc/tidings
unitdir     := $(PREFIX)/lib/systemd
bashcompdir := $(PREFIX)/share/bash-completion/completions
# zsh searches vendor-completions under /usr only; under another prefix, site-functions.
zshcompdir  := $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
fishcompdir := $(PREFIX)/share/fish/vendor_completions.d

VERSION     := $(shell sed -n 's/.*string = "\(.*\)"/\1/p' Sources/TidingsPluginAPI/Support/TidingsVersion.swift)
# What the installed binary and the man pages are made from.
SWIFT_INPUTS := Package.swift $(wildcard Package.resolved) $(shell find Sources -type f)
# The installed binary: a copy of the static release build, so that a later dynamic release
# build (make bench, make soak) cannot replace what `make install` installs.
RELEASE_BIN := .build/install/tidings
# The static build has its own build folder: sharing .build/release with the dynamic release build
# (make bench, make soak) made each of them recompile the whole package after the other.
STATIC_BUILD := .build-static
# Man pages generated from the argument parser, one per subcommand (from the debug build: the
# command line is the same in every build, so a clone needs no release build to read them).
MAN_DIR     := .build/man
# What install and deb copy: the two above, unless given on the command line, as
# Tests/e2e/test_install_modes.py does (`make install INSTALL_BIN=.build/debug/tidings
# MAN_BUILD=DIR`, DIR holding *.1 pages and a .stamp): then nothing is built, the files must exist.
INSTALL_BIN := $(RELEASE_BIN)
MAN_BUILD   := $(MAN_DIR)
# Date printed in the man pages: the last commit's, for reproducible pages.
MAN_DATE    := $(shell git log -1 --format=%cs 2>/dev/null || date +%F)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build text-order format native-guard installed-guard unit-build unit-run private-secrets run test test-calendar test-install unit e2e deps test-deps test-venv clean bench fuzz soak release man install uninstall deb

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
	@$(MAKE) --no-print-directory test-venv

# Remade when the pins change; --system-site-packages keeps Debian's pytest and dbusmock.
test-venv: $(TEST_VENV)/.stamp

$(TEST_VENV)/.stamp: Tests/e2e/requirements.txt
	$(PYTHON) -m venv --system-site-packages $(TEST_VENV)
	$(TEST_VENV)/bin/pip install -q --disable-pip-version-check -r Tests/e2e/requirements.txt
	touch $@

build: deps private-secrets
	$(SWIFT) build $(DEBUG_FLAGS)

# git keeps no file modes but the executable bit: the shipped placeholder secrets come out of a
# clone readable by all, and tidings refuses a secret file that group or others can read.
private-secrets:
	@find plugins.d/secrets -type f ! -name README -exec chmod 600 {} +

# Formats the Swift sources as .swift-format says (swift-format ships with the toolchain).
format:
	$(dir $(shell command -v $(SWIFT)))swift-format format --in-place --recursive --parallel Sources Tests Fuzz/Sources Package.swift

# Runs the daemon in the foreground on the shipped etc/ and plugins.d/, state in ./.state.
run: build
	$(BIN) run --config etc/tidings.toml --state-dir $(STATE_DIR)

# The whole suite: Swift unit tests, then the end-to-end tests against the built binary.
# The install tests (Tests/e2e/test_install.py) need the static release build (about 11 minutes
# on 2 cores, more than `make test` may take): they run with `make test-install`, and are
# skipped, saying so, in `make test`. The e2e suite and its calendar run go side by side: the
# tests mostly wait on their servers (the suite keeps under one core busy on average), and each
# test file has its own ports, directories and buses. Each run's output is printed when it ends.
test: test-deps build unit-build native-guard
	$(MAKE) --no-print-directory -j3 --output-sync=target unit-run e2e test-calendar

# The native guard (issue 31, DESIGN §15), on the debug build `make test` already makes: no object
# of these modules references swift-corelibs-foundation (one call links ICU into the binary); the
# failure names the module, the source file and the symbol. A module joins the list when it has
# moved to FoundationEssentials, until the list is every module of the product.
NATIVE_MODULES := TidingsCrypto TidingsTemplates TidingsPOSIX TidingsIPC TidingsCurl TidingsSystemBus TidingsSQLite TidingsPostgres TidingsPluginAPI TidingsEngine TidingsMonitoring TidingsProviders TidingsSinks TidingsYAML TidingsApp tidings
native-guard: unit-build
	$(PYTHON) Tests/guards/native.py .build/debug --product tidings $(NATIVE_MODULES)

# The e2e files whose outcome could depend on the date (Tests/e2e/calendar_files.py finds them:
# a date literal or calendar arithmetic in the file or a fake it imports) again with the wall
# clock CALENDAR_SHIFT seconds ahead, for the tests, their fakes and tidings alike
# (Tests/e2e/clockshift: only the wall clock moves, so timers and timeouts still hold): a date
# in a fixture that is about to pass fails here a year before it would fail everywhere.
CALENDAR_SHIFT ?= 31536000
CLOCKSHIFT     := .build/clockshift.so
$(CLOCKSHIFT): Tests/e2e/clockshift/clockshift.c
	mkdir -p $(@D)
	$(CC) -shared -fPIC -O2 -Wall -o $@ $< -ldl
test-calendar: test-venv $(CLOCKSHIFT)
	cd Tests/e2e && LD_PRELOAD=$(CURDIR)/$(CLOCKSHIFT) CLOCK_SHIFT_SECONDS=$(CALENDAR_SHIFT) \
	  TIDINGS_BIN=$(CURDIR)/$(BIN) $(CURDIR)/$(TEST_PYTHON) -m pytest -q -n $(E2E_JOBS) --dist loadfile \
	  $$($(PYTHON) calendar_files.py)

# make install/uninstall/deb, the units, man pages and completions (Tests/e2e/test_install.py),
# after the installed binary's guard (Tests/guards/installed.py): it links none of the libraries
# loaded at first use (libcurl, libxml2, libnotify, GLib: DESIGN §15) and, with INSTALL_GUARD_NATIVE=1,
# holds no ICU data and no BoringSSL (issue 31 item 1; 0 until GRDB, postgres-nio and
# swift-crypto have left the binary, then 1 for good). The failure names what it found.
INSTALL_GUARD_NATIVE ?= 1
installed-guard: release
	$(PYTHON) Tests/guards/installed.py $(if $(filter 1,$(INSTALL_GUARD_NATIVE)),--native) $(RELEASE_BIN)
test-install: test-deps build release man installed-guard
	cd Tests/e2e && TIDINGS_TEST_INSTALL=1 TIDINGS_BIN=$(CURDIR)/$(BIN) $(CURDIR)/$(TEST_PYTHON) -m pytest -q test_install.py

# The engine's tests run twice: on SQLite with the rest, then with the backend as their
# parameter set to PostgreSQL (TIDINGS_TEST_BACKEND; a server the tests start themselves, in a
# temp dir on a loopback port: TidingsTestSupport's TestState).
unit: unit-build unit-run
unit-build:
	$(SWIFT) build $(DEBUG_FLAGS) --build-tests
unit-run:
	$(SWIFT) test $(DEBUG_FLAGS) --skip-build
	TIDINGS_TEST_BACKEND=postgres $(SWIFT) test $(DEBUG_FLAGS) --skip-build --filter TidingsEngineTests

# Four test files at a time, each file on one worker (its module fixtures, Synapse say, start once).
E2E_JOBS ?= 4
e2e: test-venv
	cd Tests/e2e && TIDINGS_BIN=$(CURDIR)/$(BIN) $(CURDIR)/$(TEST_PYTHON) -m pytest -q -n $(E2E_JOBS) --dist loadfile

# The binary `make install` installs: release, with the Swift runtime linked statically, so it
# runs on a machine without the Swift toolchain (its shared libraries are Debian's); no
# RUNPATH ($ORIGIN would let a library beside the binary be loaded); relocations bound at start
# (BIND_NOW, so they can be made read-only) and packed (RELR: linked by lld, through
# packaging/lld-native.sh, with -z pack-relative-relocs and the ordering file
# packaging/text-order.txt, set in Package.swift's linkerSettings of `tidings` for release builds
# because a link-only linker choice cannot be given here); no exported symbol (packaging/exports.map); stripped,
# its debug symbols kept apart in
# $(RELEASE_BIN).debug (packaging/split-debug.sh; `make deb` packages them as tidings-dbgsym).
release: $(RELEASE_BIN)

# Every function (Swift and C) in a section of its own, so that the linker can place the code that
# start-up, `check` and the idle daemon run together (packaging/text-order.txt, issue 31).
# -internalize-at-link: the binary exports nothing (packaging/exports.map), so a public Swift
# function need not be kept when nothing calls it; without it each one goes in llvm.used and its
# section carries SHF_GNU_RETAIN, which --gc-sections must keep.
RELEASE_SECTIONS := -Xswiftc -Xfrontend -Xswiftc -function-sections -Xswiftc -Xfrontend -Xswiftc -internalize-at-link \
                    -Xcc -ffunction-sections -Xcxx -ffunction-sections

# The link is no input of SwiftPM's: a new ordering file or linker script relinks by removing the
# linked binary first.
RELEASE_LINK_INPUTS := packaging/exports.map packaging/text-order.txt packaging/lld-native.sh

$(RELEASE_BIN): $(SWIFT_INPUTS) Makefile packaging/split-debug.sh $(RELEASE_LINK_INPUTS) | deps
	@for f in $(RELEASE_LINK_INPUTS); do [ $$f -nt $(STATIC_BUILD)/release/tidings ] && rm -f $(STATIC_BUILD)/release/tidings; done; true
	$(SWIFT) build -c release --scratch-path $(STATIC_BUILD) --static-swift-stdlib --disable-local-rpath -Xlinker -z -Xlinker now \
	  $(RELEASE_SECTIONS) -Xlinker --version-script=$(CURDIR)/packaging/exports.map --product tidings
	mkdir -p $(@D)
	packaging/split-debug.sh $(STATIC_BUILD)/release/tidings $@

# packaging/text-order.txt, the release link's symbol ordering file (checked in): the functions
# that `--version`, `check` (benchmarks 1 and 6's sources, on a private nginx) and 10 s of the idle
# daemon run, profiled with callgrind on the release build (packaging/symbol-order.py; a few
# minutes). Regenerate after large changes to the code: a stale file costs resident memory,
# never correctness (lld skips the names the binary no longer has). Then `make release` relinks.
text-order: $(RELEASE_BIN)
	$(PYTHON) packaging/symbol-order.py $(STATIC_BUILD)/release/tidings packaging/text-order.txt 10

# tidings(1) and one page per subcommand, tidings-SUBCOMMAND(1) as git and systemd name theirs,
# generated from the argument parser of the debug build by swift-argument-parser's
# generate-manual (the tool behind its `swift package plugin generate-manual`, which would
# first rebuild the whole package in release mode): `make man`, then `man -l .build/man/tidings.1`.
# etc/man/generated-pages.sed names the pages and makes them indexable by whatis and quiet under groff.
man: build
	@$(MAKE) --no-print-directory $(MAN_DIR)/.stamp

$(MAN_DIR)/.stamp: $(BIN) etc/man/generated-pages.sed etc/man/md2man.py etc/man/tidings.toml.5.in $(shell find docs -name '*.md')
	$(SWIFT) build $(DEBUG_FLAGS) --product generate-manual
	rm -rf $(MAN_DIR) && mkdir -p $(MAN_DIR)
	.build/debug/generate-manual $(BIN) --multi-page --date $(MAN_DATE) --output-directory $(MAN_DIR)
	sed -i -f etc/man/generated-pages.sed $(MAN_DIR)/*.1
	cd $(MAN_DIR) && for f in tidings.*.1; do mv "$$f" "$$(echo "$${f%.1}" | tr . -).1"; done
	$(PYTHON) etc/man/md2man.py etc/man/tidings.toml.5.in . $(VERSION) $(MAN_DATE) @DOCDIR@ > $(MAN_DIR)/tidings.toml.5
	touch $@

# Every mode is explicit (directories 0755, files 0644, the binary and executable examples 0755),
# whatever the umask of the shell running it: `> FILE` would create FILE 0600 under umask 077.
# $(call install_stdout,MODE,FILE,COMMAND) installs what COMMAND prints as FILE, with MODE; fails
# (and leaves no FILE) if COMMAND does. The example secrets (plugins.d/secrets/) are placeholders
# and go in 0644 like any file under share/doc (Debian policy; lintian's non-standard-file-perm):
# documentation to copy, not secrets in use; a copy filled in is made 0600, as their README says.
install_stdout = t=$$(mktemp) && { { $(3); } >"$$t" && install -m $(1) "$$t" $(2); r=$$?; rm -f "$$t"; exit $$r; }

# Copies only: build first (`make release man`), then `sudo make install` needs no toolchain.
install: $(INSTALL_BIN) $(MAN_BUILD)/.stamp
	install -d -m 0755 $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man5 \
	  $(DESTDIR)$(bashcompdir) $(DESTDIR)$(zshcompdir) $(DESTDIR)$(fishcompdir) \
	  $(DESTDIR)$(docdir)/examples/plugins.d/secrets $(DESTDIR)$(docdir)/examples/plugins.d/examples \
	  $(DESTDIR)$(unitdir)/user $(DESTDIR)$(unitdir)/system
	install -m 0755 $(INSTALL_BIN) $(DESTDIR)$(bindir)/tidings
	install -m 0644 $(MAN_BUILD)/*.1 $(DESTDIR)$(mandir)/man1/
	$(call install_stdout,0644,$(DESTDIR)$(mandir)/man5/tidings.toml.5,sed -e 's|@DOCDIR@|$(docdir)|g' $(MAN_BUILD)/tidings.toml.5)
	$(call install_stdout,0644,$(DESTDIR)$(bashcompdir)/tidings,$(INSTALL_BIN) --generate-completion-script bash | sed '1{/^#!/d}')
	$(call install_stdout,0644,$(DESTDIR)$(zshcompdir)/_tidings,$(INSTALL_BIN) --generate-completion-script zsh)
	$(call install_stdout,0644,$(DESTDIR)$(fishcompdir)/tidings.fish,$(INSTALL_BIN) --generate-completion-script fish)
	$(call install_stdout,0644,$(DESTDIR)$(docdir)/examples/tidings.toml,sed \
	    -e 's|^plugins_dir = "../plugins.d"|plugins_dir = "plugins.d"|' \
	    -e 's|In this repository plugins.d/ sits beside etc/.|Here plugins.d/ sits beside this file.|' \
	    etc/tidings.toml)
	install -m 0644 etc/prometheus/tidings-alerts.yml $(DESTDIR)$(docdir)/examples/tidings-alerts.yml
	for f in plugins.d/* plugins.d/secrets/* plugins.d/examples/*; do \
	  [ -f "$$f" ] || continue; \
	  if [ -x "$$f" ]; then mode=0755; else mode=0644; fi; \
	  install -m $$mode "$$f" $(DESTDIR)$(docdir)/examples/$$f || exit 1; \
	done
	$(call install_stdout,0644,$(DESTDIR)$(unitdir)/user/tidings.service,sed -e 's|@BINDIR@|$(bindir)|g' -e 's|@UNITDIR@|$(unitdir)|g' etc/systemd/user/tidings.service.in)
	$(call install_stdout,0644,$(DESTDIR)$(unitdir)/system/tidings.service,sed -e 's|@BINDIR@|$(bindir)|g' -e 's|@UNITDIR@|$(unitdir)|g' etc/systemd/system/tidings.service.in)

uninstall:
	rm -f $(DESTDIR)$(bindir)/tidings
	rm -f $(DESTDIR)$(mandir)/man1/tidings.1 $(DESTDIR)$(mandir)/man1/tidings-*.1 $(DESTDIR)$(mandir)/man5/tidings.toml.5
	rm -f $(DESTDIR)$(bashcompdir)/tidings $(DESTDIR)$(zshcompdir)/_tidings $(DESTDIR)$(fishcompdir)/tidings.fish
	rm -f $(DESTDIR)$(unitdir)/user/tidings.service $(DESTDIR)$(unitdir)/system/tidings.service
	rm -rf $(DESTDIR)$(docdir)

# tidings_VERSION_ARCH.deb: the `make install` layout under /usr, /etc/tidings/tidings.toml as
# a conffile, Depends computed from the libraries the binary links. See packaging/deb.sh (and its
# DEB_WORK=DIR, DEB_OUT=DIR: where the tree is staged and the package written).
DEB_COMPRESSION ?= xz
deb: $(INSTALL_BIN) $(MAN_BUILD)/.stamp
	$(call apt_install,$(DEB_PACKAGES))
	VERSION=$(VERSION) MAKE="$(MAKE)" DEB_COMPRESSION="$(DEB_COMPRESSION)" DEB_DEBUG_FILE="$(INSTALL_BIN).debug" packaging/deb.sh

# Benchmarks (issues 5 and 23): loopback only, release build, prints a short table and issue 23's
# figures beside their goals. Not part of `make test`.
# Knobs: BENCH_N="200 1000" BENCH_RUNS=7 BENCH_DAEMON_SECONDS=135 BENCH_ONLY="1 2 3 4 5 7 8 9"
# BENCH_SHARED_SOURCES=30000 BENCH_SHARED_SECONDS=180 BENCH_IDLE_SECONDS=20 (see bench/bench.py).
# BENCH_BIG_SOURCES=100000 BENCH_BIG_INSTANCES=5 BENCH_BIG_SECONDS=600 BENCH_BIG_INTERVAL=300 (benchmark 8),
# BENCH_PER_SOURCE="1000 10000 100000" (benchmark 9).
bench:
	SWIFT=$(SWIFT) PYTHON=$(PYTHON) MAKE="$(MAKE)" bench/run.sh

# Fuzzing (issue 5): libFuzzer + AddressSanitizer over the config loader, the duration parser and
# every provider's response decoder; FUZZ_SECONDS per target (default 60, about 10 minutes in all),
# then a table. Fails if any target crashed; the input is kept. A separate package (Fuzz/) built
# into .build-fuzz, so `make build` / `make test` are untouched. Knobs: see Fuzz/run.sh.
fuzz: deps
	SWIFT=$(SWIFT) Fuzz/run.sh

# Reliability soak (issue 5): faults injected on loopback, ~10 minutes, release build, prints a
# table; exits non-zero on any lost or duplicated event. Not part of `make test`.
# Knobs: SOAK_ONLY="provider sink crash disk shared" SOAK_PROVIDER_SECONDS=120 SOAK_SINK_SECONDS=120
# SOAK_KILLS=50 SOAK_DISK_SECONDS=15 SOAK_SHARED_SECONDS=120 SOAK_SHARED_KILL_EVERY=10
# SOAK_SHARED_SOURCES=300 SOAK_SEED=N SOAK_KEEP=1 (see soak/soak.py; `shared`: three daemons on
# one PostgreSQL, kill -9 of random instances).
soak: test-deps
	SWIFT=$(SWIFT) PYTHON=$(PYTHON) soak/run.sh

clean:
	rm -rf .build $(STATIC_BUILD) $(STATE_DIR) $(TEST_VENV) tidings_*.deb
