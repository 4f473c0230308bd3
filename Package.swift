// swift-tools-version:6.1
import PackageDescription

/// What every test target may use: the module it tests, the modules below and beside it, and
/// the test support.
let testDependencies: [Target.Dependency] = [
    "TidingsCrypto", "TidingsPluginAPI", "TidingsPOSIX", "TidingsIPC", "TidingsEngine", "TidingsSQLite", "TidingsPostgres", "TidingsCurl",
    "TidingsProviders", "TidingsSinks", "TidingsSystemBus", "TidingsMonitoring", "TidingsApp", "TidingsTestSupport",
    "TidingsTemplates", "TidingsYAML",
    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
    .product(name: "Logging", package: "swift-log"),
]

/// For the modules on FoundationEssentials (DESIGN §15): a method is found only in a module the
/// file imports, so a `String.contains` cannot bind to corelibs Foundation's overload through a
/// module imported further down (the compiler names the missing import instead).
let nativeSettings: [SwiftSetting] = [.enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
    name: "tidings",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tidings", targets: ["tidings"]),
        // For the fuzz package (Fuzz/Package.swift): its one entry into tidings.
        .library(name: "TidingsFuzzTargets", targets: ["TidingsFuzzTargets"]),
        // Fakes, scratch state and a PostgreSQL server for tests of code built on tidings.
        .library(name: "TidingsTesting", targets: ["TidingsTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.0.0"),
        // Monitoring (DESIGN §8): metrics API in the core, Prometheus exposition and the [http] server in TidingsMonitoring.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        // Dependencies point down: plugin API ← providers, sinks, HTTP client; plugin API ←
        // engine ← backends ← app ← executable. docs/development.md draws the same map.

        /// All a provider or a sink imports: items, events, the Provider and Sink protocols,
        /// the HTTP and mail ports, options and secrets, redaction, SafeRegex.
        .target(
            name: "TidingsPluginAPI",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                "TidingsCrypto",
            ]
        ),
        /// SHA-256 (its own, stdlib only: fingerprints are taken in every run), and HMAC-SHA256,
        /// constant-time compare and random bytes over OpenSSL's libcrypto (the one libcurl loads;
        /// DESIGN §15): bytes in and out, no C pointer above it.
        .target(name: "TidingsCrypto", dependencies: ["CLibCrypto"]),
        /// OpenSSL's libcrypto (libssl-dev's headers), opened at first use (not linked): wrappers
        /// that call through the pointers it resolves. Only TidingsCrypto imports it.
        .target(name: "CLibCrypto", dependencies: ["CDynamicLoad"]),
        /// Processes (posix_spawn, pidfd): the exec provider and sink and apprise spawn with it.
        /// Nothing of the daemon's plumbing: a plugin that imports it gets process spawning alone.
        .target(name: "TidingsPOSIX", dependencies: ["TidingsPluginAPI", "CSpawn"]),
        /// The daemon's plumbing (socket, flock): the control socket's Unix sockets and peer
        /// credentials, the state directory's lock, SystemFailure. Only the app, the status
        /// report (TidingsMonitoring) and the executable use it; no provider or sink reaches it.
        .target(name: "TidingsIPC", dependencies: ["TidingsPluginAPI"]),
        /// The engine: scheduling, the poll pipeline, outbox, attention, sharing, and the storage
        /// seam (`StateDatabase`); no sockets, no processes, no SQLite. Knows no provider or sink by name.
        .target(
            name: "TidingsEngine",
            dependencies: [
                "TidingsPluginAPI",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        /// The SQLite backend of the storage seam (SQLite's C API): the state file, its directory
        /// and migrations. No C pointer above it.
        .target(
            name: "TidingsSQLite",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "CSQLite",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        /// SQLite (libsqlite3-dev's header), opened at the first connection (not linked): wrappers
        /// that call through the pointers it resolves. Only TidingsSQLite imports it.
        .target(name: "CSQLite", dependencies: ["CDynamicLoad"]),
        /// The PostgreSQL backend of the storage seam (libpq, on threads of its own), its schema,
        /// and `tidings state migrate`'s copy.
        .target(
            name: "TidingsPostgres",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        /// libpq (PostgreSQL's client library; its TLS is OpenSSL), opened at the first connection
        /// (not linked): its headers, and wrappers that call through the pointers it resolves.
        /// Only TidingsPostgres imports it. include/postgresql links to libpq-dev's headers.
        .target(name: "CLibPQ", dependencies: ["CDynamicLoad"], exclude: ["include/postgresql"]),
        /// The one ``HTTPClient`` (and mail, IMAP, certificate) implementation: a libcurl multi
        /// handle on its own thread. A process makes one and hands it to every provider and sink.
        .target(
            name: "TidingsCurl",
            dependencies: ["TidingsPluginAPI", "CCurl"]
        ),
        /// posix_spawn's GNU extensions and pidfd_open, which Swift's Glibc module does not show.
        .target(name: "CSpawn"),
        /// libcurl (the HTTP client's multi handle), opened when the first client is made (not
        /// linked): its headers, and wrappers that call through the pointers it resolves.
        .target(name: "CCurl", dependencies: ["CDynamicLoad"]),
        /// Every provider: one file (or folder) per remote system. Imports only the plugin API.
        .target(
            name: "TidingsProviders",
            dependencies: ["TidingsPluginAPI", "TidingsPOSIX", "CLibXML2", .product(name: "Logging", package: "swift-log")],
            swiftSettings: nativeSettings
        ),
        /// YAML documents read into a small node tree (urlwatch's urls.yaml for `tidings import`),
        /// bounded in depth and in what aliases expand to; no C pointer above it.
        .target(name: "TidingsYAML", dependencies: ["CYAML"]),
        /// libyaml's event parser (libyaml-dev's header), opened at first use (not linked: only
        /// `import urlwatch` reads YAML): wrappers that call through the pointers it resolves.
        /// Only TidingsYAML imports it.
        .target(name: "CYAML", dependencies: ["CDynamicLoad"]),
        /// libxml2 (the feed and page providers' XML and HTML parser), opened at first use (not
        /// linked): its headers, and wrappers that call through the pointers it resolves.
        /// include/libxml links to libxml2-dev's headers (SwiftPM reads no sources there).
        .target(name: "CLibXML2", dependencies: ["CDynamicLoad"], exclude: ["include/libxml"]),
        /// libnotify and GLib/GIO (desktop notifications, the system bus), opened at first use
        /// (not linked): their headers, and wrappers that call through the pointers it resolves.
        /// include/ links to the -dev packages' headers (SwiftPM reads no sources there: gobject/ holds a .c).
        .target(
            name: "CLibnotify", dependencies: ["CDynamicLoad"],
            exclude: ["include/glib", "include/gobject", "include/gio", "include/gdk-pixbuf"]),
        /// dlopen and dlsym for CCurl, CLibXML2, CLibnotify, CLibPQ, CSQLite, CYAML and CLibCrypto: a missing library is an error naming its package.
        .target(name: "CDynamicLoad"),
        /// Every sink: one file per delivery channel. Imports only the plugin API.
        .target(
            name: "TidingsSinks",
            dependencies: [
                "TidingsPluginAPI", "TidingsPOSIX", "TidingsCrypto",
                "CLibnotify",
                .product(name: "Logging", package: "swift-log"),
                "TidingsTemplates",
            ],
            swiftSettings: nativeSettings
        ),
        /// The Mustache renderer of the sinks' message templates and the status page, stdlib only
        /// (swift-mustache is only the tests' oracle).
        .target(name: "TidingsTemplates"),
        /// logind's PrepareForSleep and NetworkManager's state on the system D-Bus, for the
        /// daemon's scheduler (GDBus; GIO's headers come through CLibnotify, one module for GLib).
        .target(
            name: "TidingsSystemBus",
            dependencies: ["TidingsPluginAPI", "TidingsEngine", "CLibnotify", .product(name: "Logging", package: "swift-log")]
        ),
        /// `[http]`: /metrics (Prometheus exposition of the engine's swift-metrics), /-/healthy,
        /// /-/ready, and the status page (with `tidings status`'s report model).
        .target(
            name: "TidingsMonitoring",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "TidingsPOSIX", "TidingsIPC",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The status page (DESIGN §13): its templates and its CSRF token.
                "TidingsTemplates",
                "TidingsCrypto",
            ]
        ),
        /// The application: config loading (TOML), the daemon and its services, the control
        /// socket's server and client (over TidingsIPC), sd_notify. Everything the executable's commands run.
        .target(
            name: "TidingsApp",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "TidingsSQLite", "TidingsPostgres", "TidingsPOSIX", "TidingsIPC",
                "TidingsMonitoring", "TidingsSystemBus", "TidingsProviders", "TidingsYAML", "TidingsCrypto", "CDynamicLoad",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        /// What each `make fuzz` target does with one input: the package's only public API, for
        /// the fuzz package, which is built apart with the sanitizers.
        .target(
            name: "TidingsFuzzTargets",
            dependencies: ["TidingsPluginAPI", "TidingsApp", "TidingsProviders", "TidingsSinks", "TidingsCurl"]
        ),
        /// For tests (the `TidingsTesting` product): fakes (ScriptedProvider, ScriptedSink, a loopback
        /// HTTP server), scratch directories and configs, a real PostgreSQL started per test process,
        /// and the state a test works on (SQLite, or PostgreSQL with TIDINGS_TEST_BACKEND=postgres).
        .target(
            name: "TidingsTestSupport",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "TidingsSQLite", "TidingsPostgres", "TidingsPOSIX", "TidingsApp",
                "TidingsProviders", "TidingsSinks", "TidingsCurl",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        /// The `tidings` command: ArgumentParser commands over TidingsApp; registers the built-in
        /// providers and sinks.
        .executableTarget(
            name: "tidings",
            dependencies: [
                "TidingsPluginAPI", "TidingsEngine", "TidingsSQLite", "TidingsPOSIX", "TidingsIPC", "TidingsApp",
                "TidingsProviders", "TidingsSinks", "TidingsCurl",
                "TidingsMonitoring", "TidingsSystemBus", "TidingsPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            // Release only (`make release`): link with lld (through packaging/lld-native.sh, which
            // keeps corelibs Foundation out of the link), not the toolchain's default gold:
            // - the 75,000 relative relocations go into a packed RELR table (glibc >= 2.36): fewer
            //   pages touched by the loader at start;
            // - the functions that start-up, `check` and the idle daemon run sit together at the
            //   start of .text (packaging/text-order.txt, made by `make text-order`; the release
            //   compiles each function into a section of its own), so the kernel's fault-around
            //   brings in code that runs instead of its neighbours. A name the file lists that the
            //   binary lacks is skipped: a stale file costs memory, never correctness.
            // (docs/engineering/benchmarks.md, issue 31.) Link-only flags here, so the compile
            // commands (and the build folders) are unchanged.
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-use-ld=\(Context.packageDirectory)/packaging/lld-native.sh",
                        "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/packaging/text-order.txt",
                        "-Xlinker", "--no-warn-symbol-ordering",
                    ],
                    .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        /// `make bench` only (benchmark 3, dedupe/state throughput); not installed, not in `make test`.
        .executableTarget(
            name: "tidings-bench",
            dependencies: ["TidingsPluginAPI", "TidingsEngine", "TidingsSQLite"]
        ),
        // One test target per module; every one may use the test support and the modules below it.
        .testTarget(name: "TidingsCryptoTests", dependencies: testDependencies),
        .testTarget(name: "TidingsPluginAPITests", dependencies: testDependencies),
        .testTarget(name: "TidingsPOSIXTests", dependencies: testDependencies),
        .testTarget(name: "TidingsIPCTests", dependencies: testDependencies),
        .testTarget(name: "TidingsEngineTests", dependencies: testDependencies),
        .testTarget(
            name: "TidingsSQLiteTests", dependencies: testDependencies,
            // A state file made by an older build, read by OldStateFileTests through #filePath.
            exclude: ["Fixtures"]),
        .testTarget(name: "TidingsPostgresTests", dependencies: testDependencies),
        .testTarget(name: "TidingsCurlTests", dependencies: testDependencies),
        .testTarget(name: "TidingsProvidersTests", dependencies: testDependencies),
        .testTarget(name: "TidingsYAMLTests", dependencies: testDependencies),
        .testTarget(name: "TidingsSinksTests", dependencies: testDependencies),
        /// The renderer against swift-mustache (the oracle, a test-only dependency).
        .testTarget(
            name: "TidingsTemplatesTests",
            dependencies: testDependencies + [.product(name: "Mustache", package: "swift-mustache")]),
        .testTarget(name: "TidingsSystemBusTests", dependencies: testDependencies),
        .testTarget(name: "TidingsMonitoringTests", dependencies: testDependencies),
        .testTarget(
            name: "TidingsAppTests", dependencies: testDependencies,
            // Raw inputs that crashed `make fuzz`, read by FuzzRegressionTests through #filePath.
            exclude: ["FuzzRegressions"]),
    ]
)
