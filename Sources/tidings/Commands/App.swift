import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import TidingsApp
import TidingsCurl
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsProviders
import TidingsSQLite
import TidingsSinks

/// What a command needs: the loaded config and the state database.
struct App {
    var config: TidingsConfig
    var configFile: String
    var stateDir: String

    /// The process's one HTTP client (one libcurl thread): every provider poll and every sink
    /// sends through it. Its thread starts with the first request.
    static let http = CurlHTTPClient()
    /// The process's SMTP transport: the same client, so mail runs on the same libcurl thread.
    static var mail: any MailTransport { http }

    /// Where sinks write silences (the desktop's "Snooze 1h"): the state, once a command opens it.
    static let silences = StateSilenceWriter()

    static var loader: ConfigLoader {
        var loader = ConfigLoader(providers: BuiltinProviders.registry, sinks: BuiltinSinks.registry, http: http, mail: mail)
        loader.silences = silences
        return loader
    }

    /// Loads the configuration, or reports every error as `FILE:LINE: message` and exits 78.
    /// Commands that only read the state pass `secrets: .lenient`: a secret they cannot read
    /// (the daemon's, say) is then a warning, not a reason to refuse. Commands that list the
    /// sources and never poll them pass `listing: true` (``ConfigLoader/listing``).
    /// `recipes`: the daemon's load (``ConfigLoader/recipesWhereShared``).
    static func load(
        _ options: CommonOptions, logLevel: Logger.Level, secrets: SecretPolicy = .required, listing: Bool = false, recipes: Bool = false
    ) throws -> App {
        Log.bootstrap(level: options.logLevel(default: logLevel))
        let file = ConfigLoader.locate(explicit: options.config)
        let config: TidingsConfig
        var loader = Self.loader
        loader.secrets = secrets
        loader.listing = listing
        loader.recipesWhereShared = recipes
        do {
            config = try loader.load(file: file)
        } catch let e as ConfigErrors {
            for err in e.errors { complain(err.description) }
            for w in e.warnings { complain("warning: \(w)", level: .warning) }
            throw ExitCode(Exit.config)
        }
        for w in config.warnings { complain("warning: \(w)", level: .warning) }
        http.limitConnectionsPerHost(config.maxPerHost)
        return App(config: config, configFile: file, stateDir: resolveStateDir(options.stateDir, config: config))
    }

    /// `--state-dir`, else `$TIDINGS_STATE_DIR`, else `state_dir` in the config, else `$XDG_STATE_HOME/tidings`.
    static func resolveStateDir(_ flag: String?, config: TidingsConfig?) -> String {
        let env = ProcessInfo.processInfo.environment
        if let flag { return absolute(flag) }
        if let e = env["TIDINGS_STATE_DIR"], !e.isEmpty { return absolute(e) }
        if let s = config?.stateDir { return s }
        let home = env["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        let xdg = env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.local/state"
        return "\(xdg)/tidings"
    }

    static func absolute(_ p: String) -> String {
        let e = PathResolver.expandTilde(p)
        return e.hasPrefix("/") ? e : FileManager.default.currentDirectoryPath + "/" + e
    }

    /// `writable`: fail unless the state directory can be written (the daemon: SQLite could
    /// open a file on a read-only file system and then fail every write).
    func openStore(writable: Bool = false) throws -> StateStore {
        if config.state.isPostgres {
            do {
                let store = StateStore(database: try SharedState.open(config.state, logger: Log.logger("state")))
                Self.silences.attach(store)
                return store
            } catch {
                complain("cannot open the state database \(config.state.location) (\(config.state.origin)): \(Redactor.shared.scrub("\(error)"))")
                throw ExitCode(Exit.failure)
            }
        }
        if writable, access(stateDir, W_OK) != 0, errno != ENOENT {
            complain("cannot write the state directory \(stateDir): \(String(cString: strerror(errno)))")
            throw ExitCode(Exit.failure)
        }
        do {
            let store = try StateStore.open(directory: stateDir, logger: Log.logger("state"))
            Self.silences.attach(store)
            return store
        } catch {
            // SQLite only says "unable to open database file": say why when the directory is the reason.
            let why = access(stateDir, W_OK) == 0 ? "" : " (\(stateDir): \(String(cString: strerror(errno))))"
            complain("cannot open the state database in \(stateDir): \(error)\(why)")
            throw ExitCode(Exit.failure)
        }
    }

    var router: Router {
        Router(routes: config.routes, allSinks: config.sinks.map(\.name))
    }

    /// The sources named on the command line (all enabled ones if none), each once, in the
    /// order of its first mention; unknown names exit 64.
    func selectSources(_ names: [String]) throws -> [SourceConfig] {
        if names.isEmpty { return config.sources.filter { $0.settings.enabled } }
        return try names.firstMentions().map { name in
            guard let s = config.source(named: name) else {
                let known = config.sources.map(\.name).joined(separator: ", ")
                complain("no source named '\(name)' (configured: \(known.isEmpty ? "none" : known))")
                throw ExitCode(Exit.usage)
            }
            return s
        }
    }
}
