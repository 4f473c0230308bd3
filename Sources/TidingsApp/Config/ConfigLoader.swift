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
    /// Where ``ParsedConfigCache/location(pluginsDir:stateDir:environment:)`` looks for the
    /// cache of parsed plugin files (tests point it at their own folder, or turn it off).
    package var cacheEnvironment: [String: String] = ProcessInfo.processInfo.environment
    /// A listing load, for commands that show the sources but never poll them (`tidings
    /// sources`, `tidings status`): each source's shared settings (`provider`, `interval`,
    /// `enabled`, `group`, …) are read and checked as in any load, and so is everything else
    /// but the provider's own options: no provider is made (``ListedProvider`` stands in), unless
    /// the source's table may hold a secret (``OptionReader/mayHoldSecrets(_:)``), whose
    /// warnings and config hash need the provider that reads it. Errors in a provider's own
    /// options are then left to `tidings config check` and to the commands that poll.
    package var listing = false
    /// The daemon's loads: where `[state]` is a shared PostgreSQL, sources without secrets are
    /// kept as recipes and built when their lease is taken (SourceRecipes.swift, issue 33).
    package var recipesWhereShared = false

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
        // A source is built (``BuiltSource``) apart from this load's shared lists, so that plugins
        // are built on the workers that parse them; `addSource` then takes it in file order.
        let sourceDefaults = defaults
        let sourcesDir = pluginsDir
        let recipes = recipesWhereShared && state.isPostgres
        var recipeStore: [UInt8] = []
        // How many sources plugins.d is about to hand over (``scanPlugins``): the source list and
        // the recipes are reserved at about their size, not grown by doubling (issue 33: at
        // 100,000 sources the grown list and recipes and their exact copies were 100 of the
        // load's 183 MB peak, heaptrack).
        var expected = 0
        var recipesKept = 0
        func addSource(name: String, table: ConfigTable, built: @autoclosure () -> BuiltSource) {
            collect {
                if let first = declared[name] {
                    throw ConfigError(file: table.file, line: table.line, "source \"\(name)\" is declared twice (first at \(first))")
                }
                declared[name] = Self.location(table)
                guard Self.isValidSourceName(name) else {
                    throw ConfigError(file: table.file, line: table.line, "source name \"\(name)\" may use only letters, digits, '.', '_' and '-'")
                }
                let b = built()
                warnings += b.warnings
                errors += b.errors
                guard let src = b.source else { return }
                guard let recipe = b.recipe else { return sources.append(src) }
                sources.append(Self.keep(src, recipe: recipe, in: &recipeStore))
                recipesKept += 1
                // The recipes' size, from the first 256 (a source's recipe is ~100-300 bytes).
                if recipesKept == 256, expected > 2 * recipesKept {
                    recipeStore.reserveCapacity(recipeStore.count / recipesKept * expected * 9 / 8)
                }
            }
        }
        collect {
            guard let t = try main.subtable("sources") else { return }
            for name in t.table.keys {
                collect {
                    guard let s = try t.subtable(name) else { return }
                    addSource(
                        name: name, table: s.table,
                        built: buildSource(
                            name: name, table: s.table, baseDir: s.baseDirectory, implicitExec: nil, defaults: sourceDefaults, pluginsDir: sourcesDir,
                            asRecipe: recipes))
                }
            }
        }
        collect { try main.finish() }
        // Reading the cache (decoding an entry per plugin file, on one core) runs beside the
        // listing of plugins.d, and is waited for when the first file is parsed.
        let cache = CacheRead(path: ParsedConfigCache.location(pluginsDir: pluginsDir, stateDir: stateDir, environment: cacheEnvironment))
        defer { cache.value.save() }
        collect {
            try scanPlugins(
                pluginsDir, cache: cache.value, explicit: main.has("plugins_dir") ? (file, root["plugins_dir"]?.line) : nil,
                prepare: { name, table, exec in
                    // A name refused below is not built (nor are its errors reported): skip the work.
                    guard Self.isValidSourceName(name) else { return BuiltSource() }
                    return buildSource(
                        name: name, table: table, baseDir: sourcesDir, implicitExec: exec, defaults: sourceDefaults, pluginsDir: sourcesDir, asRecipe: recipes)
                },
                // A table is kept in the parse cache only if it built a source and holds no secret.
                cacheable: { $0.source != nil && !$0.readInlineSecret },
                expecting: { n in
                    expected = n
                    sources.reserveCapacity(sources.count + n)
                },
                each: { name, table, _, built in addSource(name: name, table: table, built: built) })
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
        // Sorted in place, and copied to an array of the exact size only if the one appended to
        // has more than an eighth unused (it was reserved at the number of plugin files: a grown
        // array has up to twice the capacity, ~230 bytes a source, heaptrack, issue 33).
        sources.sort { $0.name < $1.name }
        if sources.capacity - sources.count > sources.count / 8 { sources = sources.withUnsafeBufferPointer { Array($0) } }
        var config = TidingsConfig(
            file: file, pluginsDir: pluginsDir, stateDir: stateDir, defaults: defaults, sources: sources,
            sinks: sinkConfigs, routes: routes, maxConcurrent: maxConcurrent, maxPerHost: maxPerHost,
            historyDays: historyDays, shutdownTimeout: shutdownTimeout, deliveryMaxAge: deliveryMaxAge, http: monitoring,
            warnings: warnings, state: state)
        config.deadLetterDays = deadLetterDays
        if recipes {
            config.builder = RecipeBuilder(
                loader: self, defaults: defaults, pluginsDir: pluginsDir,
                recipes: recipeStore.capacity - recipeStore.count > recipeStore.count / 8 ? recipeStore.withUnsafeBufferPointer { Array($0) } : recipeStore)
        }
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
        // On the UTF-8 view itself: a copy of it into an array, for each of 10,000 plugins, cost
        // a third of taking the plugin's result in.
        guard let first = name.utf8.first, alnum(first) else { return false }
        return name.utf8.dropFirst().allSatisfy { alnum($0) || $0 == 95 || $0 == 46 || $0 == 45 }
    }

    /// `FILE:LINE` of a table, or `FILE`.
    static func location(_ table: ConfigTable) -> String { table.line.map { "\(table.file):\($0)" } ?? table.file }

    /// One source built: the source, or the errors that refused it, and its warnings in order.
    struct BuiltSource: Sendable {
        var source: SourceConfig?
        /// Its recipe, where it is to be kept as one (``keep(_:recipe:in:)``).
        var recipe: [UInt8]?
        var errors: [ConfigError] = []
        var warnings: [String] = []
        /// Its table holds a secret written inline (``OptionReader/readInlineSecret``).
        var readInlineSecret = false
    }

    /// Builds a source from its table on its own (it touches no list of the load, so plugins
    /// are built in parallel): a source declared twice or misnamed is refused by the caller.
    /// `asRecipe`: kept as a recipe once built, unless it has secrets (SourceRecipes.swift).
    func buildSource(
        name: String, table: ConfigTable, baseDir: String, implicitExec: String?, defaults: SourceSettings, pluginsDir: String,
        asRecipe: Bool = false
    ) -> BuiltSource {
        let out = Mutex(BuiltSource())
        let where_ = Self.location(table)
        let r = OptionReader(table, what: "source \"\(name)\"", baseDirectory: baseDir)
        r.warnings = { w in out.withLock { $0.warnings.append("\(w)") } }
        if secrets == .lenient {
            r.lenientSecrets = { w in out.withLock { $0.warnings.append("\(w) (ignored: this command only reads the state)") } }
        }
        do {
            let src = try buildSource(
                name: name, reader: r, implicitExec: implicitExec, defaults: defaults, pluginsDir: pluginsDir,
                warn: { w in out.withLock { $0.warnings.append("\(where_): \(w)") } })
            let recipe = asRecipe && r.secretHashes.isEmpty ? Self.recipe(table: table, reader: r, implicitExec: implicitExec, pluginsDir: pluginsDir) : nil
            out.withLock {
                $0.source = src
                $0.recipe = recipe
            }
        } catch let e as ConfigError {
            out.withLock { $0.errors.append(e) }
        } catch let e as ConfigErrors {
            out.withLock { $0.errors += e.errors }
        } catch {
            out.withLock { $0.errors.append(ConfigError(file: table.file, line: nil, "\(error)")) }
        }
        let inline = r.readInlineSecret
        return out.withLock {
            $0.readInlineSecret = inline
            return $0
        }
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
        if listing && !OptionReader.mayHoldSecrets(table) {
            // Reading the table reads no secret, so its hash is the one a built provider gives;
            // worked out only where the state holds one to compare (``TidingsConfig/completeConfigHashes(for:)``).
            return SourceConfig(
                name: name, provider: providerName, settings: settings, flapWindow: flap,
                instance: ListedProvider(configHash: { Fingerprint.of([providerName, Self.describe(table)]) }),
                file: table.file, line: table.line, configHash: "")
        }
        let setup = ProviderSetup(sourceName: name, pluginsDir: pluginsDir, interval: settings.interval)
        let instance = try factory.make(r, setup, warn)
        try r.finish()
        assert(
            r.secretHashes.isEmpty || OptionReader.mayHoldSecrets(table),
            "\(what): provider \(providerName) read a secret OptionReader.mayHoldSecrets does not see")
        return SourceConfig(
            name: name, provider: providerName, settings: settings, flapWindow: flap, instance: instance,
            file: table.file, line: table.line, configHash: Fingerprint.of([providerName, Self.describe(table)] + r.secretHashes))
    }

    /// Stable text of a table's contents (for change detection on reload).
    private static func describe(_ t: ConfigTable) -> String {
        t.keys.map { k -> String in
            guard let n = t[k] else { return k }
            switch n.value {
            case .string(let s): return "\(k)=\(s)"
            case .int(let i): return "\(k)=\(i)"
            case .double(let d): return "\(k)=\(d)"
            case .bool(let b): return "\(k)=\(b)"
            case .table(let sub): return "\(k)={\(Self.describe(sub))}"
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
    /// `prepare` runs on the parsing workers, for each plugin that parsed; `each` gets its result.
    /// `expecting` is told, before the first is parsed, how many `.toml` files there are.
    /// `cache` keeps a parsed table for the next load when `cacheable` says so of what `prepare`
    /// made of it.
    func scanPlugins<Prepared: Sendable>(
        _ dir: String, cache readCache: @autoclosure () -> ParsedConfigCache = ParsedConfigCache(path: nil), explicit: (String, Int?)?,
        prepare: @Sendable (String, ConfigTable, String?) -> Prepared,
        cacheable: @Sendable (Prepared) -> Bool = { _ in false },
        expecting: (Int) -> Void = { _ in },
        each: (String, ConfigTable, String?, Prepared) -> Void
    ) throws {
        var st = stat()
        guard stat(dir, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            if let (file, line) = explicit {
                throw ConfigError(file: file, line: line, "plugins_dir \(dir) is not a directory")
            }
            return
        }
        let trust = PluginTrust(directory: dir)
        var errors = trust.directoryProblems
        let entries = try Self.listDirectory(dir).filter { e in
            let n = e.name
            return !(n.hasPrefix(".") || n.hasSuffix("~") || n.hasSuffix(".disabled") || n.containsBytes(of: ".dpkg-")
                || n.hasSuffix(".rpmnew") || n.hasSuffix(".rpmsave") || n.hasSuffix(".swp"))
        }.sorted { $0.name < $1.name }
        let names = entries.map(\.name)
        let present = Set(names)
        // Parsing is most of loading a large plugins.d: files are parsed on all cores, a chunk at
        // a time, and each chunk is handed over and dropped before the next, so 10,000 plugin
        // files are never all held in memory as parsed tables at once.
        let tomls = entries.filter { $0.name.hasSuffix(".toml") }
        expecting(tomls.count)
        let cache = readCache()
        // Entries are opened relative to the directory: one lookup of the name, not of every
        // component of the path again (-1, if it cannot be opened: then by path).
        let dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if dirfd >= 0 { close(dirfd) } }
        let chunk = 256
        for base in stride(from: 0, to: tomls.count, by: chunk) {
            let count = min(chunk, tomls.count - base)
            let parsed = Mutex([(ParsedPlugin, Prepared?)?](repeating: nil, count: count))
            DispatchQueue.concurrentPerform(iterations: count) { k in
                let result = parsePlugin(dir: dir, dirfd: dirfd, entry: tomls[base + k], present: present, trust: trust, cache: cache)
                let prepared = result.table.map { prepare(result.name, $0, result.implicitCommand) }
                if let offer = result.cacheOffer, let prepared, cacheable(prepared) { cache.keep(result.file, offer) }
                parsed.withLock { $0[k] = (result, prepared) }
            }
            for case (let result, let prepared)? in parsed.withLock({ $0 }) {
                errors += result.errors
                if let table = result.table, let prepared { each(result.name, table, result.implicitCommand, prepared) }
            }
        }
        let withConfig = Set(tomls.map(\.name))
        for n in names where !n.hasSuffix(".toml") && !withConfig.contains("\(n).toml") {
            let path = "\(dir)/\(n)"
            guard FilePermissions.isExecutableFile(path) else { continue }
            errors += trust.problems(path, as: .plugin)
            let table = ConfigTable(file: path, path: "", line: nil, keys: [], entries: [:])
            each(n, table, "./\(n)", prepare(n, table, "./\(n)"))
        }
        if !errors.isEmpty { throw ConfigErrors(errors) }
    }

    /// One `NAME.toml` read: its table if it parsed, and what is wrong with it.
    struct ParsedPlugin {
        /// `NAME.toml`, and NAME.
        var file: String
        var name: String
        var table: ConfigTable?
        /// `./NAME` when an executable `NAME` is beside it.
        var implicitCommand: String?
        var errors: [ConfigError]
        /// What the parse cache keeps of `table` under `file`, for ``ParsedConfigCache/keep(_:_:)``.
        var cacheOffer: ParsedConfigCache.Offer? = nil
    }

    /// One entry of a directory: its name and `d_type` (`DT_UNKNOWN` where the file system does not say).
    struct DirectoryEntry: Sendable {
        var name: String
        var type: UInt8
    }

    /// The entries of `dir` but `.` and `..`, in no order, with their types: readdir(3) says
    /// which are regular files, so those are read without a stat of their path first.
    static func listDirectory(_ dir: String) throws -> [DirectoryEntry] {
        guard let d = opendir(dir) else {
            throw ConfigError(file: dir, line: nil, "cannot read plugins directory: \(String(cString: strerror(errno)))")
        }
        defer { closedir(d) }
        var out: [DirectoryEntry] = []
        while true {
            errno = 0
            guard let e = readdir(d) else {
                if errno != 0 { throw ConfigError(file: dir, line: nil, "cannot read plugins directory: \(String(cString: strerror(errno)))") }
                return out
            }
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            out.append(DirectoryEntry(name: name, type: e.pointee.d_type))
        }
    }

    /// Reads and parses one `NAME.toml`; an executable `NAME` beside it (`present` lists the
    /// directory) is its command.
    private func parsePlugin(
        dir: String, dirfd: Int32, entry: DirectoryEntry, present: Set<String>, trust: PluginTrust, cache: ParsedConfigCache
    ) -> ParsedPlugin {
        let file = entry.name
        let name = String(file.dropLast(5))
        let path = "\(dir)/\(file)"
        let exe = present.contains(name) ? "\(dir)/\(name)" : nil
        let hasExecutable = exe.map { FilePermissions.isExecutableFile($0) } ?? false
        var result = ParsedPlugin(
            file: file, name: name, implicitCommand: hasExecutable ? "./\(name)" : nil,
            errors: hasExecutable ? trust.problems(exe!, as: .plugin) : [])
        // A regular file the parse cache holds under its current status (one fstatat, not
        // followed: a symbolic link is read below) is neither opened nor read; its trust is
        // checked from that status.
        if cache.mayServeByStatus, dirfd >= 0, entry.type == UInt8(DT_REG) || entry.type == UInt8(DT_UNKNOWN), trust.realDirectory != nil {
            var st = stat()
            if fstatat(dirfd, file, &st, AT_SYMLINK_NOFOLLOW) == 0, st.st_mode & S_IFMT == S_IFREG,
                let cached = cache.fresh(name: file, status: st, file: path)
            {
                result.errors = trust.entryProblems(file, status: st, as: .pluginConfig) + result.errors
                (result.table, result.cacheOffer) = cached
                return result
            }
        }
        do {
            let bytes: [UInt8]
            var status: stat? = nil
            if entry.type == UInt8(DT_REG) || entry.type == UInt8(DT_UNKNOWN), let read = trust.readEntry(file, in: dirfd, as: .pluginConfig) {
                result.errors = read.problems + result.errors
                bytes = read.bytes
                status = read.status
            } else {
                result.errors = trust.problems(path, as: .pluginConfig) + result.errors
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ConfigError(file: path, line: nil, "cannot read plugin config")
                }
                bytes = Array(data)
            }
            (result.table, result.cacheOffer) = try cache.table(bytes, name: file, status: status, file: path)
        } catch let e as ConfigError {
            result.errors.append(e)
        } catch {
            result.errors.append(ConfigError(file: path, line: nil, "\(error)"))
        }
        return result
    }
}

/// The ``ParsedConfigCache`` at a path, read on another thread from when this is made; ``value``
/// waits for it.
final class CacheRead: Sendable {
    private let read = Mutex<ParsedConfigCache?>(nil)
    private let done = DispatchGroup()

    init(path: String?) {
        guard let path else {
            read.withLock { $0 = ParsedConfigCache(path: nil) }
            return
        }
        DispatchQueue.global().async(group: done) {
            let cache = ParsedConfigCache(path: path)
            self.read.withLock { $0 = cache }
        }
    }

    var value: ParsedConfigCache {
        done.wait()
        return read.withLock { $0! }
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

    /// Reads the regular file `name` in the directory and checks it, through one descriptor
    /// (opened without following a symbolic link; its `fstat` is what is checked, so the file
    /// checked is the file read): one lookup of the path where ``problems(_:as:)`` and a read by
    /// path took three. Nil where that does not apply (the directory has no real path, the entry
    /// is not a regular file, it cannot be opened or read): the caller falls back to those.
    /// `dirfd`: the directory opened, or -1 to open the entry by its path.
    /// `status`: the `fstat` taken before the bytes were read.
    func readEntry(_ name: String, in dirfd: Int32 = -1, as role: FileTrust.Role) -> (bytes: [UInt8], problems: [ConfigError], status: stat)? {
        guard let real = realDirectory else { return nil }
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let fd = dirfd >= 0 ? openat(dirfd, name, flags) : open("\(directory)/\(name)", flags)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, let bytes = Self.readRegular(fd, size: Int(st.st_size)) else { return nil }
        return (bytes, entryProblems(name, status: st, as: role, real: real), st)
    }

    /// What ``FileTrust/checkEntry(_:status:as:)`` finds wrong with the entry `name` of the
    /// directory, from its status taken already; its real path is made only for a message.
    func entryProblems(_ name: String, status st: stat, as role: FileTrust.Role) -> [ConfigError] {
        guard let real = realDirectory else { return trust.check("\(directory)/\(name)", as: role, stopAt: vouched).map(\.configError) }
        return entryProblems(name, status: st, as: role, real: real)
    }

    private func entryProblems(_ name: String, status st: stat, as role: FileTrust.Role, real: String) -> [ConfigError] {
        if trust.trusts(st) { return [] }
        return trust.checkEntry(real == "/" ? "/\(name)" : "\(real)/\(name)", status: st, as: role).map(\.configError)
    }

    /// All of a regular file whose `fstat` said `size` bytes: a read that returns less than it
    /// asked for is at the end of a regular file, so a file that did not grow takes one read(2),
    /// not a second one to see the end.
    static func readRegular(_ fd: Int32, size: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: max(size, 0) + 1)
        var count = 0
        while true {
            if count == out.count { out += [UInt8](repeating: 0, count: out.count) }
            let want = out.count - count
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, want) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            count += n
            if n < want { break }
        }
        out.removeLast(out.count - count)
        return out
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

/// What a listing load (``ConfigLoader/listing``) holds in place of a provider it did not make:
/// such a configuration is shown, never polled, and a poll of it fails. Its source's
/// ``SourceConfig/configHash`` is left empty (it matches no stored hash) until
/// ``TidingsConfig/completeConfigHashes(for:)`` works it out.
package struct ListedProvider: Provider {
    /// The source's config hash, as a full load gives it.
    let configHash: @Sendable () -> String

    package func poll(_ context: PollContext) async throws -> PollResult {
        throw PollError(.transient, "this source was loaded for a listing, not to be polled")
    }
}

extension TidingsConfig {
    /// Gives each source of a listing load named in `names` (those whose stored state holds an
    /// auth-failed hash: ``StateStore/authFailedSources()``) the config hash a full load gives it,
    /// so that ``SourceHealth`` tells `auth-failed` as for any load. Hashing every source would
    /// cost a listing of 10,000 of them a tenth of its time.
    package mutating func completeConfigHashes(for names: Set<String>) {
        guard !names.isEmpty else { return }
        for i in sources.indices where names.contains(sources[i].name) {
            if let listed = sources[i].instance as? ListedProvider { sources[i].configHash = listed.configHash() }
        }
    }
}
