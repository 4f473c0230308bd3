import ArgumentParser
import Foundation
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Work with the configuration.",
        subcommands: [Check.self, Init.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Validate the configuration and plugins.d; errors print as FILE:LINE: message (exit 78).",
            discussion: """
                Reports every error found, not only the first, and warns about what would silently do \
                nothing (no sink configured). With --poll, each enabled source (or each one named) is \
                also polled once, with a timeout of at most 10s and nothing recorded, to catch what only \
                a response shows: a wrong URL or credential, or an http-json 'key' that matches none of \
                the items. Exit status: 0 valid, 2 a sample poll failed, 78 configuration error.
                """)

        @OptionGroup var common: CommonOptions

        @Flag(help: "Also poll each enabled source once (records nothing).")
        var poll = false

        @Argument(help: "With --poll: the sources to poll (default: every enabled source).", completion: ConfigCompletion.sources)
        var sources: [String] = []

        func validate() throws {
            if !sources.isEmpty && !poll { throw ValidationError("source names are for --poll") }
        }

        func run() async throws {
            let app = try App.load(common, logLevel: .warning)
            let c = app.config
            let enabled = c.sources.filter { $0.settings.enabled }.count
            emit(
                "\(app.configFile): OK: \(c.sources.count) source\(c.sources.count == 1 ? "" : "s") (\(enabled) enabled), \(c.sinks.count) sink\(c.sinks.count == 1 ? "" : "s"), \(c.routes.count) route\(c.routes.count == 1 ? "" : "s"); plugins from \(c.pluginsDir)"
            )
            guard poll else { return }
            let selected = try app.selectSources(sources)
            let http = App.http
            var failed = false
            for (source, outcome) in zip(selected, await SamplePoll.run(selected, http: http, limit: c.maxConcurrent)) {
                if !SamplePoll.show(source.name, outcome) { failed = true }
            }
            if failed { throw ExitCode(Exit.failure) }
        }
    }

    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Write a starter configuration where tidings will find it; never overwrites.",
            discussion: """
                --user (the default) writes $XDG_CONFIG_HOME/tidings/tidings.toml \
                (~/.config/tidings/tidings.toml), mode 0600 in a 0700 directory, with a desktop sink. \
                --system writes /etc/tidings/tidings.toml (mode 0644, read by the system service's \
                unprivileged user) with a stdout sink, which the journal records. --config PATH writes \
                there instead. An empty plugins.d/ is made beside the file for the sources. Exit status: \
                0 written, 2 not written (the file exists, or cannot be created).
                """)

        @OptionGroup var common: CommonOptions

        @Flag var scope: StarterConfig.Scope = .user

        func run() async throws {
            let starter = StarterConfig(scope: scope)
            let file = common.config.map(App.absolute) ?? starter.defaultFile
            let pluginsDir: String
            do {
                pluginsDir = try starter.create(at: file)
            } catch {
                complain(error.description)
                throw ExitCode(Exit.failure)
            }
            emit("wrote \(file) (mode \(String(format: "%04o", starter.fileMode))), and \(pluginsDir)/ for the sources")
            let examples = StarterConfig.installedExamples.map { " and the examples in \($0)/" } ?? ""
            let config = common.config == nil ? "" : " --config \(file)"
            emit(
                """
                next:
                  1. add a source: \(pluginsDir)/NAME.toml (see `man tidings.toml`\(examples))
                  2. check it:     tidings\(config) config check
                  3. start it:     \(scope == .user ? "systemctl --user enable --now tidings" : "systemctl enable --now tidings")
                """)
            let found = ConfigLoader.locate(explicit: nil)
            if found != file {
                emit("note: without --config, tidings reads \(found), not this file (see FILES in `man tidings.toml`)")
            }
        }
    }
}

/// The configuration `tidings config init` writes: small, valid, and pointing to where every
/// key is described. A desktop user gets a desktop sink; the system service a stdout sink
/// (under systemd, the journal).
struct StarterConfig {
    enum Scope: String, EnumerableFlag {
        case user, system

        static func help(for value: Scope) -> ArgumentHelp? {
            switch value {
            case .user: return "For you: ~/.config/tidings/tidings.toml (default)."
            case .system: return "For the system service: /etc/tidings/tidings.toml."
            }
        }
    }

    let scope: Scope

    var defaultFile: String { scope == .user ? ConfigLoader.userFile() : ConfigLoader.systemFile }
    /// A user's file may come to hold secrets; the system one must be readable by the
    /// service's dynamic user (secrets go in credentials there).
    var fileMode: mode_t { scope == .user ? 0o600 : 0o644 }
    var directoryMode: mode_t { scope == .user ? 0o700 : 0o755 }

    var text: String {
        let sink =
            switch scope {
            case .user:
                """
                [sinks.desktop]
                type = "desktop"          # notifications in your desktop session
                """
            case .system:
                """
                [sinks.journal]
                type = "stdout"           # one line per event on stdout: the journal, under systemd
                """
            }
        return """
            # tidings configuration, written by `tidings config init --\(scope.rawValue)` (tidings \(TidingsVersion.string)).
            # Every key is described in tidings.toml(5): `man tidings.toml`. After editing, check
            # this file with `tidings config check`.

            # Sources: each NAME.toml in plugins.d/ beside this file is the source NAME, and each
            # executable file there without a NAME.toml is an exec source. Sources may also be
            # [sources.NAME] tables in this file.
            # plugins_dir = "plugins.d"

            # Settings every source gets unless it sets its own.
            [defaults]
            interval = "5m"           # time between polls, times a random factor in [0.9, 1.1]
            timeout = "30s"

            # Where events go. With no [[routes]], every event goes to every sink.
            \(sink)

            """
    }

    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// Creates `file` (never replacing one) with the starter text and `fileMode`, its missing
    /// directories and an empty plugins.d beside it with `directoryMode`; returns plugins.d.
    func create(at file: String) throws(Refusal) -> String {
        let dir = (file as NSString).deletingLastPathComponent
        let plugins = dir + "/plugins.d"
        if FileManager.default.fileExists(atPath: file) {
            throw Refusal(description: "\(file) exists; not overwriting it (edit it, or move it away first)")
        }
        try makeDirectory(dir)
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        guard fd >= 0 else { throw Refusal(description: "cannot create \(file): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        // fchmod: the mode exactly, whatever the umask.
        let written = fchmod(fd, fileMode) == 0 && bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
        let writeError = errno
        if close(fd) != 0 || !written {
            let why = String(cString: strerror(written ? errno : writeError))
            unlink(file)
            throw Refusal(description: "cannot write \(file): \(why)")
        }
        try makeDirectory(plugins)
        return plugins
    }

    private func makeDirectory(_ path: String) throws(Refusal) {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue { return }
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: Int(directoryMode)])
        } catch {
            throw Refusal(description: "cannot create \(path): \((error as NSError).localizedDescription)")
        }
    }

    /// `share/doc/tidings/examples` of the installation this binary belongs to, when present.
    static var installedExamples: String? {
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let prefix = ((exe as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        let examples = prefix + "/share/doc/tidings/examples"
        return FileManager.default.fileExists(atPath: examples) ? examples : nil
    }
}

/// `config check --poll`: one poll of each source, without the state (nothing is read or
/// recorded, no validators are sent). Findings a provider logs while polling (an http-json
/// `key` that matches no item) appear on stderr.
enum SamplePoll {
    /// A sample poll waits at most this long, whatever the source's `timeout`.
    static let timeoutCap: TimeInterval = 10
    /// The items listed under a source's count.
    static let shown = 10

    enum Outcome {
        case items([Item])
        case notModified
        case failed(PollError)
    }

    /// Polls concurrently, at most `limit` at a time; outcomes in the order of `sources`.
    static func run(_ sources: [SourceConfig], http: any HTTPClient, limit: Int) async -> [Outcome] {
        let slots = AsyncSemaphore(limit)
        return await withTaskGroup(of: (Int, Outcome).self) { group in
            for (i, s) in sources.enumerated() {
                group.addTask { await slots.withPermit { (i, await poll(s, http: http)) } }
            }
            var out: [(Int, Outcome)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    /// Prints what a sample poll found (`tidings config check --poll`, `tidings add`): the count,
    /// then the first items, one line each; a failure on stderr. Returns false for a failure.
    static func show(_ name: String, _ outcome: Outcome) -> Bool {
        switch outcome {
        case .items(let items):
            let n = items.count
            emit("source \(name): polled, \(n) item\(n == 1 ? "" : "s")")
            // What would be taken: the first items, one line each.
            for item in items.prefix(shown) {
                emit("  \(TerminalText.line(Redactor.shared.scrub("\(item.key): \(item.title)")).prefix(160))")
            }
            if n > shown { emit("  … and \(n - shown) more") }
        case .notModified: emit("source \(name): polled, not modified")
        case .failed(let error):
            complain("source \(name): sample poll failed: \(error.message)")
            return false
        }
        return true
    }

    static func poll(_ source: SourceConfig, http: any HTTPClient) async -> Outcome {
        let timeout = min(source.settings.timeout, timeoutCap)
        var logger = Log.logger("config")
        logger[metadataKey: "source"] = "\(source.name)"
        let context = PollContext(
            source: source.name, http: http, timeout: timeout, maxBody: source.settings.maxBody, logger: logger,
            privateRedirects: source.settings.privateRedirects)
        let provider = source.instance
        do {
            let result = try await withTimeout(
                timeout + 1,
                onTimeout: {
                    PollError(.transient, "timed out after \(DurationParser.format(timeout))")
                }
            ) {
                try await provider.prepare(context)
                return try await provider.poll(context)
            }
            switch result.content {
            case .snapshot(let items, _), .rebaseline(let items, _): return .items(items)
            case .notModified: return .notModified
            }
        } catch let e as PollError {
            return .failed(e)
        } catch {
            return .failed(PollError(.transient, "\(error)"))
        }
    }
}
