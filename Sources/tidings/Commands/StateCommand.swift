import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI
import TidingsPostgres
import TidingsSQLite

struct StateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "Work with the stored state.",
        subcommands: [Forget.self, Migrate.self])

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "forget",
            abstract: "Drop what tidings remembers about a source; its next poll is a silent baseline.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The source to forget.", completion: ConfigCompletion.sources)
        var source: String

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let n = try app.openStore().forget(source: source)
            if app.config.source(named: source) == nil {
                complain("note: '\(source)' is not a configured source", level: .notice)
            }
            emit("forgot \(n) item\(n == 1 ? "" : "s") of \(source); its next poll is a baseline")
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Copy the SQLite state into a PostgreSQL database.",
            discussion: """
                Copies source status, items, events (keeping their numbers), deliveries, notices, \
                silences and reminders from the state directory's tidings.sqlite into the database \
                at URL, in one transaction. Rows already there are left alone: a second run copies \
                nothing. Refused while a daemon runs on the SQLite state. The password comes from \
                --password-file, else $PGPASSWORD, else [state] in the config when URL is its url.
                """)

        @OptionGroup var common: CommonOptions

        @Option(name: .customLong("to"), help: ArgumentHelp("The PostgreSQL database: postgres://USER@HOST:PORT/DATABASE[?sslmode=MODE].", valueName: "url"))
        var url: String

        @Option(
            name: .customLong("password-file"), help: ArgumentHelp("A file holding the database password (first line).", valueName: "path"), completion: .file()
        )
        var passwordFile: String?

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let settings = try destination(app)
            let sqlitePath = "\(app.stateDir)/tidings.sqlite"
            guard FileManager.default.fileExists(atPath: sqlitePath) else {
                complain("no SQLite state at \(sqlitePath): nothing to migrate")
                throw ExitCode(Exit.failure)
            }
            // Held (shared) until the copy ends: a daemon starting meanwhile waits for it.
            let lock: StateLock?
            do {
                switch try StateLock.share(directory: app.stateDir) {
                case .shared(let held): lock = held
                case .heldByDaemon(let pid):
                    complain(
                        "a daemon\(pid.map { " (PID \($0))" } ?? "") runs on the state in \(app.stateDir): stop it first, so that nothing changes during the copy"
                    )
                    throw ExitCode(Exit.failure)
                }
            } catch let e as SystemFailure {
                // A state we may only read: no daemon can hold it either.
                complain("note: cannot check for a daemon (\(e)); copying anyway", level: .notice)
                lock = nil
            }
            let stateDir = app.stateDir
            let counts: [StateCopy.TableCount]
            do {
                let target = try await onOwnThread { try PostgresStateDatabase.open(settings, logger: Log.logger("state")) }
                do {
                    counts = try await onOwnThread {
                        let store = try StateStore.open(directory: stateDir, logger: Log.logger("state"))
                        return try StateCopy.copy(from: store.database, to: target)
                    }
                } catch {
                    await target.close()
                    throw error
                }
                await target.close()
            } catch {
                complain("cannot migrate \(sqlitePath): \(error)")
                throw ExitCode(Exit.failure)
            }
            withExtendedLifetime(lock) {}
            for c in counts { emit(c.description) }
            let copied = counts.reduce(0) { $0 + $1.copied }
            emit(
                copied == 0
                    ? "nothing to copy: \(settings.location) already holds every row" : "copied \(copied) row\(copied == 1 ? "" : "s") to \(settings.location)")
        }

        /// `--to` as `[state]` settings: sslmode (and sslrootcert, connect_timeout) from its
        /// query, the password from --password-file, $PGPASSWORD, or the config's `[state]`.
        func destination(_ app: App) throws -> StateSettings {
            guard var c = URLComponents(string: url), ["postgres", "postgresql"].contains(c.scheme?.lowercased() ?? "") else {
                complain("--to must be a postgres:// URL (postgres://USER@HOST:PORT/DATABASE)")
                throw ExitCode(Exit.usage)
            }
            if c.password != nil {
                complain("--to must not carry a password (others can read a command line): use --password-file or $PGPASSWORD")
                throw ExitCode(Exit.usage)
            }
            c.password = nil
            guard let parsed = c.url else {
                complain("--to is not a URL")
                throw ExitCode(Exit.usage)
            }
            var settings = StateSettings(url: parsed)
            let query = Dictionary((c.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            if let mode = query["sslmode"] {
                guard let tls = StateSettings.TLSMode(rawValue: mode) else {
                    complain("sslmode must be one of \(StateSettings.TLSMode.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(mode)\"")
                    throw ExitCode(Exit.usage)
                }
                settings.tls = tls
            } else {
                settings.tls = settings.isLoopback ? .disable : .verifyFull
            }
            settings.caFile = query["sslrootcert"]
            if let t = query["connect_timeout"].flatMap(Double.init) { settings.connectTimeout = max(1, t) }
            let configured = app.config.state
            if let passwordFile {
                switch Self.readText(App.absolute(passwordFile)) {
                case .success(let text):
                    settings.password = Secret(String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? ""))
                case .failure(let why):
                    complain("cannot read --password-file \(passwordFile): \(why)")
                    throw ExitCode(Exit.failure)
                }
            } else if let env = ProcessInfo.processInfo.environment["PGPASSWORD"], !env.isEmpty {
                settings.password = Secret(env)
            } else if configured.isPostgres, configured.location == settings.location {
                settings.password = configured.password
                settings.caFile = settings.caFile ?? configured.caFile
            }
            return settings
        }

        /// The file's text (UTF-8), or why it cannot be read.
        static func readText(_ path: String) -> Result<String, ReadRefusal> {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return .failure(ReadRefusal(description: String(cString: strerror(errno)))) }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { return .failure(ReadRefusal(description: String(cString: strerror(errno)))) }
                if n == 0 { break }
                bytes.append(contentsOf: buffer[0..<n])
            }
            guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(ReadRefusal(description: "not UTF-8 text")) }
            return .success(text)
        }

        struct ReadRefusal: Error, CustomStringConvertible {
            let description: String
        }
    }
}

/// Runs blocking work (libpq blocks while it connects and migrates) on a thread of its own,
/// not the cooperative pool.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let started = startDetachedThread(name: "tidings-state") { continuation.resume(with: Result { try body() }) }
        if !started { continuation.resume(throwing: ThreadRefused()) }
    }
}

/// ``onOwnThread`` could not start its thread (the process has too many).
struct ThreadRefused: Error, CustomStringConvertible {
    var description: String { "cannot start a thread" }
}
