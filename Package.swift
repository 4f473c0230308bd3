// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "tidings",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tidings", targets: ["tidings"]),
        .library(name: "TidingsCore", targets: ["TidingsCore"]),
        // For the fuzz package (Fuzz/Package.swift), which links the providers and sinks from outside.
        .library(name: "TidingsProviders", targets: ["TidingsProviders"]),
        .library(name: "TidingsSinks", targets: ["TidingsSinks"]),
        .library(name: "TidingsCurl", targets: ["TidingsCurl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.0.0"),
        // Monitoring (DESIGN §8): metrics API in the core, Prometheus exposition and the [http] server in TidingsMonitoring.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        // Shared state (DESIGN §11): the PostgreSQL backend, in TidingsPostgres only.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
    ],
    targets: [
        /// The pipeline: model, config, state, scheduler, dedupe, routing, outbox,
        /// and the Provider / Sink protocols. Knows no provider or sink by name.
        .target(
            name: "TidingsCore",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                // sqlite3_busy_timeout: a write from async code that can start at once runs in place.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                "CSpawn",
            ]
        ),
        /// The one ``HTTPClient`` implementation: a libcurl multi handle on its own thread. A
        /// process makes one and hands it to every provider and sink (the core has no sockets).
        .target(
            name: "TidingsCurl",
            dependencies: ["TidingsCore", "CCurl"]
        ),
        /// posix_spawn's GNU extensions and pidfd_open, which Swift's Glibc module does not show.
        .target(name: "CSpawn"),
        /// libcurl (the HTTP client's multi handle), via pkg-config.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        /// One file (or folder) per remote system.
        .target(
            name: "TidingsProviders",
            dependencies: ["TidingsCore", "CLibXML2", .product(name: "Logging", package: "swift-log")]
        ),
        /// libxml2 (the feed provider's XML parser, in recovery mode), via pkg-config.
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        /// libnotify (desktop notifications over D-Bus), via pkg-config.
        .systemLibrary(
            name: "CLibnotify",
            pkgConfig: "libnotify",
            providers: [.apt(["libnotify-dev"])]
        ),
        /// One file per delivery channel.
        .target(
            name: "TidingsSinks",
            dependencies: [
                "TidingsCore",
                "CLibnotify",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Mustache", package: "swift-mustache"),
            ]
        ),
        /// logind's PrepareForSleep and NetworkManager's state on the system D-Bus, for the
        /// daemon's scheduler (GDBus; GIO's headers come through CLibnotify, one module for GLib).
        .target(
            name: "TidingsSystemBus",
            dependencies: ["TidingsCore", "CLibnotify", .product(name: "Logging", package: "swift-log")]
        ),
        /// `[http]`: /metrics (Prometheus exposition of the core's swift-metrics), /-/healthy,
        /// /-/ready, and the status page (with `tidings status`'s report model). Its own target so the server and exporter stay out of the core and its tests.
        .target(
            name: "TidingsMonitoring",
            dependencies: [
                "TidingsCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The status page (DESIGN §13): its templates and its CSRF token.
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        /// The PostgreSQL ``StateDatabase`` (postgres-nio), its schema, and `tidings state
        /// migrate`'s copy. Its own target: the core and its SQLite default do not link it.
        .target(
            name: "TidingsPostgres",
            dependencies: [
                "TidingsCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        /// For tests only: a real PostgreSQL started per test process, and the state a test
        /// works on (SQLite, or PostgreSQL with TIDINGS_TEST_BACKEND=postgres).
        .target(
            name: "TidingsTestSupport",
            dependencies: [
                "TidingsCore", "TidingsPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "tidings",
            dependencies: [
                "TidingsCore", "TidingsProviders", "TidingsSinks", "TidingsCurl",
                "TidingsMonitoring", "TidingsSystemBus", "TidingsPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        /// `make bench` only (benchmark 3, dedupe/state throughput); not installed, not in `make test`.
        .executableTarget(
            name: "tidings-bench",
            dependencies: ["TidingsCore"]
        ),
        .testTarget(
            name: "TidingsCoreTests",
            dependencies: [
                "TidingsCore", "TidingsProviders", "TidingsSinks", "TidingsCurl",
                "TidingsMonitoring", "TidingsSystemBus", "TidingsPostgres", "TidingsTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            // Raw inputs that crashed `make fuzz`, read by FuzzRegressionTests through #filePath.
            exclude: ["FuzzRegressions"]
        ),
    ]
)
