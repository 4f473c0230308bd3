import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// What loading does with a secret it cannot read (a missing `X_file`, an unset `X_env`, an
/// inline secret in a readable file).
package enum SecretPolicy: Sendable {
    /// A configuration error: for everything that polls or delivers.
    case required
    /// A warning, and a placeholder that authenticates nowhere: for commands that only read the
    /// state (`sources`, `history`, `items`, `notices`, `outbox`), which may run as a user who
    /// cannot read the daemon's secrets.
    case lenient
}

/// Finds, parses and validates the configuration (DESIGN §2–§3).
package struct ConfigLoader: Sendable {
    package var providers: ProviderRegistry
    package var sinks: SinkRegistry
    package var secrets: SecretPolicy
    /// The process's one HTTP client, handed to every sink built here (providers get it per poll).
    package var http: any HTTPClient
    /// The process's one SMTP transport, handed to every sink built here (the `email` sink uses it).
    package var mail: any MailTransport
    /// Handed to every sink built here (``SinkSetup/silences``).
    package var silences: (any SilenceWriter)?

    package init(
        providers: ProviderRegistry, sinks: SinkRegistry, http: any HTTPClient, mail: any MailTransport,
        secrets: SecretPolicy = .required
    ) {
        self.providers = providers
        self.sinks = sinks
        self.http = http
        self.mail = mail
        self.secrets = secrets
    }

    /// The main config path: `--config`, else `$TIDINGS_CONFIG`, else
    /// `$XDG_CONFIG_HOME/tidings/tidings.toml`, else `/etc/tidings/tidings.toml`.
    package static func locate(explicit: String?, environment env: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit { return absolute(explicit) }
        if let p = env["TIDINGS_CONFIG"], !p.isEmpty { return absolute(p) }
        let user = userFile(environment: env)
        if FileManager.default.fileExists(atPath: user) { return user }
        return systemFile
    }

    /// The user's config: `$XDG_CONFIG_HOME/tidings/tidings.toml` (`~/.config/tidings/tidings.toml`).
    package static func userFile(environment env: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let home = env["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        let xdg = env["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(home)/.config"
        return "\(xdg)/tidings/tidings.toml"
    }

    /// The system-wide config, found when the user has none.
    package static let systemFile = "/etc/tidings/tidings.toml"

    static func absolute(_ p: String) -> String {
        let e = PathResolver.expandTilde(p)
        return e.hasPrefix("/") ? e : FileManager.default.currentDirectoryPath + "/" + e
    }

    /// Loads everything; throws ``ConfigErrors`` listing every problem found.
    ///
    /// The main file, the directories above it, `plugins_dir` and everything tidings takes from
    /// it must be safe from other users (``FileTrust``): each failure names its file.
    package func load(file: String) throws -> TidingsConfig {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ConfigErrors([ConfigError(file: file, line: nil, "cannot read config file (does it exist? --config PATH or $TIDINGS_CONFIG)")])
        }
        let untrusted = FileTrust().check(file, as: .config).map(\.configError)
        let config: TidingsConfig
        do {
            config = try load(text: String(decoding: data, as: UTF8.self), file: file)
        } catch let e as ConfigErrors {
            throw ConfigErrors(Self.unique(untrusted + e.errors), warnings: e.warnings)
        }
        if !untrusted.isEmpty { throw ConfigErrors(untrusted, warnings: config.warnings) }
        return config
    }

    /// Errors in order, each once (a directory above both the config and plugins_dir is
    /// reported by both checks).
    static func unique(_ errors: [ConfigError]) -> [ConfigError] {
        var seen: Set<String> = []
        return errors.filter { seen.insert($0.description).inserted }
    }

    /// Loads the main config from its text; `file` names it in errors and locates the default
    /// `plugins.d` beside it (which is still read from disk). The string entry point `make fuzz` uses.
    package func load(text: String, file: String) throws -> TidingsConfig {
        let root: ConfigTable
        do {
            root = try ConfigTable.parse(text, file: file)
        } catch let e as ConfigError {
            throw ConfigErrors([e])
        }
        var errors: [ConfigError] = []
        var warnings: [String] = []
        func collect(_ body: () throws -> Void) {
            do { try body() } catch let e as ConfigError { errors.append(e) } catch let e as ConfigErrors {
                errors += e.errors
            } catch { errors.append(ConfigError(file: file, line: nil, "\(error)")) }
        }
        /// A reader for a table that may hold secrets, under this load's ``SecretPolicy``.
        func tableReader(_ table: ConfigTable, what: String, baseDirectory: String? = nil) -> OptionReader {
            let r = OptionReader(table, what: what, baseDirectory: baseDirectory)
            r.warnings = { warnings.append("\($0)") }
            if secrets == .lenient {
                r.lenientSecrets = { warnings.append("\($0) (ignored: this command only reads the state)") }
            }
            return r
        }

        let main = tableReader(root, what: "config")
        var pluginsDir = PathText.parent(file) + "/plugins.d"
        var stateDir: String? = nil
        var defaults = SourceSettings()
        var maxConcurrent = 32
        var maxPerHost = 4
        var historyDays = 30
        var deadLetterDays = 30
        var shutdownTimeout: TimeInterval = 10
        var deliveryMaxAge: TimeInterval = 86_400
        var monitoring: HTTPSettings? = nil
        collect { if let p = try main.path("plugins_dir") { pluginsDir = p } }
        collect { stateDir = try main.path("state_dir") }
        var state = StateSettings.sqlite
        collect {
            guard let r = try main.subtable("state") else { return }
            collect { state = try StateSettings(r) }
            try r.finish()
        }
        collect { if let v = try main.int("max_concurrent", range: 1...10_000) { maxConcurrent = v } }
        collect { if let v = try main.int("max_per_host", range: 1...1000) { maxPerHost = v } }
        collect { if let v = try main.int("history_days", range: 1...36_500) { historyDays = v } }
        collect { if let v = try main.duration("shutdown_timeout") { shutdownTimeout = v } }
        collect { if let v = try main.duration("delivery_max_age", minimum: 60) { deliveryMaxAge = v } }
        collect { if let v = try main.int("dead_letter_days", range: 1...36_500) { deadLetterDays = v } }
        collect {
            guard let h = try main.subtable("http") else { return }
            collect { monitoring = try HTTPSettings(h, warn: { warnings.append($0) }) }
            try h.finish()
        }
        collect {
            if let d = try main.subtable("defaults") {
                defaults = try defaults.overlaid(with: d)
                try d.finish()
            }
        }

        // Sinks
        var sinkConfigs: [SinkConfig] = []
        collect {
            guard let table = try main.subtable("sinks") else { return }
            for name in table.table.keys {
                collect {
                    guard let r = try table.subtable(name) else { return }
                    let what = "sink \"\(name)\""
                    let reader = tableReader(r.table, what: what, baseDirectory: r.baseDirectory)
                    let type = try reader.requiredString("type")
                    guard let f = sinks.factory(type: type) else {
                        throw reader.error("type", "\(what): unknown sink type '\(type)' (known: \(sinks.types.joined(separator: ", ")))")
                    }
                    var setup = SinkSetup(name: name, logger: Log.logger("sink.\(name)"), http: http, mail: mail)
                    setup.silences = silences
                    let instance = try f.make(reader, setup)
                    try reader.finish()
                    sinkConfigs.append(SinkConfig(name: name, type: type, instance: instance, file: file, line: r.table.line))
                }
            }
        }

        // Routes (their `match` names are checked against the sources once those are loaded)
        var routes: [Route] = []
        var matches: [RouteMatch] = []
        collect {
            guard let n = root["routes"] else {
                main.markConsumed("routes")
                return
            }
            main.markConsumed("routes")
            guard case .array(let items) = n.value else {
                throw ConfigError(file: file, line: n.line, "'routes' must be an array of tables: write [[routes]]")
            }
            for (i, item) in items.enumerated() {
                collect {
                    guard case .table(let t) = item.value else {
                        throw ConfigError(file: file, line: item.line, "routes[\(i)] must be a table")
                    }
                    let what = "route #\(i + 1)"
                    let r = OptionReader(t, what: what)
                    r.warnings = { warnings.append("\($0)") }
                    var route = Route(sinks: try r.stringList("sinks") ?? [])
                    if route.sinks.isEmpty { throw r.error(nil, "\(what): 'sinks' must name at least one sink") }
                    route.continueMatching = try r.bool("continue") ?? false
                    collect { route.attention.quietHours = try QuietHours.option(r) }
                    collect {
                        guard let s = try r.string("quiet_bypass") else { return }
                        guard let v = Severity(rawValue: s) else { throw r.error("quiet_bypass", "\(what): unknown severity '\(s)' (info, warning, critical)") }
                        if !r.has("quiet_hours") { r.warning("quiet_bypass", "\(what): 'quiet_bypass' without 'quiet_hours' has no effect") }
                        route.attention.quietBypass = v
                    }
                    collect { route.attention.groupWait = try r.duration("group_wait", minimum: 1) }
                    // As short as a source's interval: reminders come with polls, and e2e tests use seconds.
                    collect { route.attention.repeatInterval = try r.duration("repeat_interval", minimum: 1) }
                    if let m = try r.subtable("match") {
                        route.source = try m.stringList("source")
                        route.provider = try m.stringList("provider")
                        route.kind = try m.stringList("kind")
                        route.severity = try m.stringList("severity")
                        route.event = try m.stringList("event")
                        for s in route.severity ?? [] where Severity(rawValue: s) == nil {
                            errors.append(m.error("severity", "\(what): unknown severity '\(s)' (info, warning, critical)"))
                        }
                        for s in route.event ?? [] where EventType(rawValue: s) == nil {
                            errors.append(m.error("event", "\(what): unknown event '\(s)' (\(EventType.allCases.map(\.rawValue).joined(separator: ", ")))"))
                        }
                        for p in route.provider ?? [] where providers.factory(named: p) == nil {
                            errors.append(m.error("provider", "\(what): match names no provider '\(p)' (known: \(providers.names.joined(separator: ", ")))"))
                        }
                        collect { try m.finish() }
                        matches.append(RouteMatch(what: what, reader: m, sources: route.source ?? []))
                        if route.attention.repeatInterval != nil, !route.canRemind {
                            r.warning(
                                "repeat_interval",
                                "\(what): 'repeat_interval' has no effect: its match names no severity warning or critical, or no event new, changed or reminder"
                            )
                        }
                    }
                    collect { try r.finish() }
                    for s in route.sinks
                    where !sinkConfigs.contains(where: { $0.name == s }) && !errors.contains(where: { $0.message.firstRange(of: "sink \"\(s)\"") != nil }) {
                        errors.append(r.error("sinks", "\(what): no sink named '\(s)' (define [sinks.\(s)])"))
                    }
                    routes.append(route)
                }
            }
        }

        // Sources: main file [sources.NAME], then plugins.d
        var sources: [SourceConfig] = []
        var declared: [String: String] = [:]
        func addSource(name: String, table: ConfigTable, baseDir: String, implicitExec: String?) {
            collect {
                let where_ = table.line.map { "\(table.file):\($0)" } ?? table.file
                if let first = declared[name] {
                    throw ConfigError(file: table.file, line: table.line, "source \"\(name)\" is declared twice (first at \(first))")
                }
                declared[name] = where_
                guard Self.isValidSourceName(name) else {
                    throw ConfigError(file: table.file, line: table.line, "source name \"\(name)\" may use only letters, digits, '.', '_' and '-'")
                }
                let r = tableReader(table, what: "source \"\(name)\"", baseDirectory: baseDir)
                let src = try buildSource(
                    name: name, reader: r, implicitExec: implicitExec,
                    defaults: defaults, pluginsDir: pluginsDir, warn: { warnings.append("\(where_): \($0)") })
                sources.append(src)
            }
        }
        collect {
            guard let t = try main.subtable("sources") else { return }
            for name in t.table.keys {
                collect {
                    guard let s = try t.subtable(name) else { return }
                    addSource(name: name, table: s.table, baseDir: s.baseDirectory, implicitExec: nil)
                }
            }
        }
        collect { try main.finish() }
        collect {
            try scanPlugins(pluginsDir, explicit: main.has("plugins_dir") ? (file, root["plugins_dir"]?.line) : nil) { name, table, exec in
                addSource(name: name, table: table, baseDir: pluginsDir, implicitExec: exec)
            }
        }

        // A route matching a source that does not exist never fires: a typo, or a plugin renamed.
        for m in matches {
            for name in m.sources where declared[name] == nil {
                let known = declared.keys.sorted().joined(separator: ", ")
                errors.append(m.reader.error("source", "\(m.what): match names no configured source '\(name)' (configured: \(known.isEmpty ? "none" : known))"))
            }
        }
        if sinkConfigs.isEmpty {
            warnings.append("\(file): no sinks configured: `tidings run` records events but delivers them nowhere (add a [sinks.NAME] table)")
        }

        if !errors.isEmpty { throw ConfigErrors(Self.unique(errors), warnings: warnings) }
        sources.sort { $0.name < $1.name }
        var config = TidingsConfig(
            file: file, pluginsDir: pluginsDir, stateDir: stateDir, defaults: defaults, sources: sources,
            sinks: sinkConfigs, routes: routes, maxConcurrent: maxConcurrent, maxPerHost: maxPerHost,
            historyDays: historyDays, shutdownTimeout: shutdownTimeout, deliveryMaxAge: deliveryMaxAge, http: monitoring,
            warnings: warnings, state: state)
        config.deadLetterDays = deadLetterDays
        return config
    }

    /// A route's `match` table, kept to check the source names it matches once all sources are loaded.
    private struct RouteMatch {
        var what: String
        var reader: OptionReader
        var sources: [String]
    }

    /// `^[A-Za-z0-9][A-Za-z0-9_.-]*$` without compiling a regular expression per source.
    static func isValidSourceName(_ name: String) -> Bool {
        func alnum(_ b: UInt8) -> Bool { (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) }
        let u = Array(name.utf8)
        guard let first = u.first, alnum(first) else { return false }
        return u.dropFirst().allSatisfy { alnum($0) || $0 == 95 || $0 == 46 || $0 == 45 }
    }

    private func buildSource(
        name: String, reader r: OptionReader, implicitExec: String?, defaults: SourceSettings,
        pluginsDir: String, warn: (String) -> Void
    ) throws -> SourceConfig {
        let what = r.what
        let table = r.table
        let providerName = try r.string("provider") ?? (implicitExec != nil ? "exec" : nil)
        guard let providerName else { throw r.error(nil, "\(what): missing required key 'provider' (one of: \(providers.names.joined(separator: ", ")))") }
        guard let factory = providers.factory(named: providerName) else {
            throw r.error("provider", "\(what): unknown provider '\(providerName)' (known: \(providers.names.joined(separator: ", ")))")
        }
        let settings = try defaults.overlaid(with: r)
        let flap = try r.duration("flap_window") ?? factory.defaultFlapWindow
        r.implicitCommand = implicitExec
        r.placeholdersExpected = !settings.enabled
        let setup = ProviderSetup(sourceName: name, pluginsDir: pluginsDir, interval: settings.interval)
        let instance = try factory.make(r, setup, warn)
        try r.finish()
        return SourceConfig(
            name: name, provider: providerName, settings: settings, flapWindow: flap, instance: instance,
            file: table.file, line: table.line, configHash: Fingerprint.of([providerName, describe(table)] + r.secretHashes))
    }

    /// Stable text of a table's contents (for change detection on reload).
    private func describe(_ t: ConfigTable) -> String {
        t.keys.map { k -> String in
            guard let n = t[k] else { return k }
            switch n.value {
            case .string(let s): return "\(k)=\(s)"
            case .int(let i): return "\(k)=\(i)"
            case .double(let d): return "\(k)=\(d)"
            case .bool(let b): return "\(k)=\(b)"
            case .table(let sub): return "\(k)={\(describe(sub))}"
            case .array(let a): return "\(k)=[\(a.count):\(a.map { "\($0.value)" }.joined(separator: ","))]"
            case .other(let o): return "\(k)=\(o)"
            }
        }.joined(separator: ";")
    }

    /// Reads `plugins.d`: `NAME.toml` files and executables (DESIGN §2).
    /// Hands each plugin that parses (name, parsed table, implicit command) to `each`, in
    /// file-name order, then throws every failure found. The directory, each `.toml` and each
    /// executable must be safe from other users (``FileTrust``); a plugin refused for that is
    /// still handed over, so that `config check` reports its other errors too.
    func scanPlugins(_ dir: String, explicit: (String, Int?)?, each: (String, ConfigTable, String?) -> Void) throws {
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            if let (file, line) = explicit {
                throw ConfigError(file: file, line: line, "plugins_dir \(dir) is not a directory")
            }
            return
        }
        let trust = PluginTrust(directory: dir)
        var errors = trust.directoryProblems
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted().filter { n in
            !(n.hasPrefix(".") || n.hasSuffix("~") || n.hasSuffix(".disabled") || n.firstRange(of: ".dpkg-") != nil
                || n.hasSuffix(".rpmnew") || n.hasSuffix(".rpmsave") || n.hasSuffix(".swp"))
        }
        // Parsing is most of loading a large plugins.d: files are parsed on all cores, a chunk at
        // a time, and each chunk is handed over and dropped before the next, so 10,000 plugin
        // files are never all held in memory as parsed tables at once.
        let tomls = names.filter { $0.hasSuffix(".toml") }
        let chunk = 256
        for base in stride(from: 0, to: tomls.count, by: chunk) {
            let count = min(chunk, tomls.count - base)
            let parsed = Mutex([ParsedPlugin?](repeating: nil, count: count))
            DispatchQueue.concurrentPerform(iterations: count) { k in
                let result = parsePlugin(dir: dir, file: tomls[base + k], trust: trust)
                parsed.withLock { $0[k] = result }
            }
            for result in parsed.withLock({ $0 }) {
                guard let result else { continue }
                errors += result.errors
                if let table = result.table { each(result.name, table, result.implicitCommand) }
            }
        }
        let withConfig = Set(tomls)
        for n in names where !n.hasSuffix(".toml") && !withConfig.contains("\(n).toml") {
            let path = "\(dir)/\(n)"
            guard FilePermissions.isExecutableFile(path) else { continue }
            errors += trust.problems(path, as: .plugin)
            each(n, ConfigTable(file: path, path: "", line: nil, keys: [], entries: [:]), "./\(n)")
        }
        if !errors.isEmpty { throw ConfigErrors(errors) }
    }

    /// One `NAME.toml` read: its table if it parsed, and what is wrong with it.
    struct ParsedPlugin {
        var name: String
        var table: ConfigTable?
        /// `./NAME` when an executable `NAME` is beside it.
        var implicitCommand: String?
        var errors: [ConfigError]
    }

    /// Reads and parses one `NAME.toml`; an executable `NAME` beside it is its command.
    private func parsePlugin(dir: String, file: String, trust: PluginTrust) -> ParsedPlugin {
        let name = String(file.dropLast(5))
        let path = "\(dir)/\(file)"
        let exe = "\(dir)/\(name)"
        let hasExecutable = FilePermissions.isExecutableFile(exe)
        var result = ParsedPlugin(
            name: name, implicitCommand: hasExecutable ? "./\(name)" : nil,
            errors: trust.problems(path, as: .pluginConfig) + (hasExecutable ? trust.problems(exe, as: .plugin) : []))
        do {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigError(file: path, line: nil, "cannot read plugin config")
            }
            result.table = try ConfigTable.parse(String(decoding: data, as: UTF8.self), file: path)
        } catch let e as ConfigError {
            result.errors.append(e)
        } catch {
            result.errors.append(ConfigError(file: path, line: nil, "\(error)"))
        }
        return result
    }
}

/// ``FileTrust`` for one `plugins_dir`: the directory (and those above it) once, then each
/// entry; an entry that is a symbolic link is checked where it leads.
package struct PluginTrust: Sendable {
    package let trust = FileTrust()
    /// The real path of the directory, where checks of its entries stop climbing.
    package let vouched: Set<String>
    package let directoryProblems: [ConfigError]
    /// The directory as named, and its real path.
    let directory: String
    let realDirectory: String?

    package init(directory: String) {
        self.directory = directory
        realDirectory = FileTrust.realPath(directory)
        vouched = Set([realDirectory].compactMap { $0 })
        directoryProblems = trust.check(directory, as: .pluginsDirectory).map(\.configError)
    }

    package func problems(_ path: String, as role: FileTrust.Role) -> [ConfigError] {
        // A regular file (not a symbolic link) named in the directory: its real path is the
        // directory's plus its name, and the directory is checked already, so only the entry
        // is left (realpath(3) would readlink every component again, for each of 10,000 files).
        if let real = realDirectory, path.hasPrefix(directory + "/") {
            let name = path.dropFirst(directory.count + 1)
            var st = stat()
            if !name.isEmpty, name != ".", name != "..", name.firstIndex(of: "/") == nil, lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG {
                return trust.checkEntry(real == "/" ? "/\(name)" : "\(real)/\(name)", as: role).map(\.configError)
            }
        }
        return trust.check(path, as: role, stopAt: vouched).map(\.configError)
    }
}
