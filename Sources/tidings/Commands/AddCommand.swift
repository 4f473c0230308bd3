import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsProviders

/// `tidings add WHAT` (DESIGN §14): looks at what a person has at hand, writes
/// `plugins_dir/NAME.toml` only once the source loads and a sample poll answers, shows what
/// that poll found, and asks a running daemon to reload.
struct AddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a source from a web address, a GitHub repository, a host or a mailbox.",
        discussion: """
            WHAT is a web address (a feed, or a page: a page announcing feeds gives its first feed, \
            or the one --pick N chooses; a page without one is watched as a page), \
            github.com/OWNER/REPO (its releases), HOST[:PORT] or smtp://HOST or imap://HOST (its TLS \
            certificate), imaps://USER@HOST/MAILBOX (a mailbox; the password goes to a file of its \
            own, mode 600), or a provider and its options: `tidings add page URL --select 'css:main'`, \
            `tidings add http-json URL --items /builds`, `tidings add exec -- ./check_disk -w 10%`. \
            The source is loaded and polled once before anything is written; then plugins.d/NAME.toml \
            is written (never over an existing file or source), the items the poll found are shown, \
            and a running daemon is asked to reload. Exit status: 0 written (or, with --dry-run, \
            would be; or the address is watched already), 64 usage or a question a non-interactive \
            run cannot answer, 69 the address could not be reached or read, 73 the file could not be \
            written, 78 configuration error.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(
        help: ArgumentHelp("An address, or a provider name and its arguments (exec: its command after --).", valueName: "what"),
        completion: .list(AddressLookup.providerForms))
    var words: [String] = []

    @Option(help: ArgumentHelp("The source's name (default: derived from the address).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Time between polls, e.g. 10m, 1h (default: [defaults] interval).", valueName: "duration"))
    var interval: String?

    @Option(help: ArgumentHelp("Which of the feeds a page announces (1 = the first).", valueName: "n"))
    var pick: Int?

    @Option(help: ArgumentHelp("Watch this part of a page: css:SELECTOR or xpath:EXPR (a bare selector is CSS).", valueName: "selector"))
    var select: String?

    @Option(help: ArgumentHelp("A JSON response's items: a JSON pointer (http-json).", valueName: "pointer"))
    var items: String?

    @Option(help: ArgumentHelp("The password of a mailbox: read from this file (otherwise asked on the terminal).", valueName: "file"), completion: .file())
    var passwordFile: String?

    @Option(help: ArgumentHelp("GitHub's API base URL (GitHub Enterprise Server: https://HOST/api/v3).", valueName: "url"))
    var githubAPI: String?

    @Flag(help: "Write the source disabled (enabled = false).")
    var disabled = false

    @Flag(help: "Print the file that would be written; write nothing.")
    var dryRun = false

    /// 69 (EX_UNAVAILABLE): the address could not be reached or read.
    static let unreachable: Int32 = 69
    /// 73 (EX_CANTCREAT): the file could not be written.
    static let cannotWrite: Int32 = 73

    func validate() throws {
        if let pick, pick < 1 { throw ValidationError("--pick counts from 1") }
        if let interval {
            do { _ = try DurationParser.seconds(interval) } catch { throw ValidationError("--interval \(interval): \(error)") }
        }
        if let name, !SourceFileWriter.isValidName(name) {
            throw ValidationError("--name \(name): a source name uses letters, digits, '.', '_' and '-', starting with a letter or digit")
        }
    }

    func run() async throws {
        let app = try App.load(common, logLevel: .warning)
        // Words after `--` are positional too: `exec -- ./check -w 10%` is the command.
        var request = AddRequest(words: words)
        if words.first == "exec" {
            request.words = ["exec"]
            request.command = Array(words.dropFirst())
        }
        request.pick = pick
        request.select = select
        request.items = items
        request.githubAPI = githubAPI
        var writer = SourceFileWriter(
            pluginsDir: app.config.pluginsDir, inventory: SourceInventory.read(configFile: app.configFile, pluginsDir: app.config.pluginsDir))
        // An address watched already is said before anything is fetched.
        if let address = AddressLookup.watchedURL(of: request), let owner = writer.inventory.watcher(of: address) {
            emit("already watched by the source \(owner) (\(writer.inventory.origin(of: owner) ?? app.config.pluginsDir)): nothing written")
            return
        }
        let lookup: Lookup
        do {
            lookup = try await AddressLookup(http: App.http).look(request, knownProviders: BuiltinProviders.registry.names)
        } catch {
            Self.complainLines(error.description)
            switch error {
            case .usage: throw ExitCode(Exit.usage)
            case .unreachable: throw ExitCode(Self.unreachable)
            }
        }
        for note in lookup.notes { emit(TerminalText.line(note)) }

        var draft = lookup.draft
        if let name { draft.name = name }
        if let interval { draft.options.append(SourceOption("interval", .string(interval), comment: "Time between polls.")) }
        if disabled { draft.options.insert(SourceOption("enabled", .boolean(false)), at: 0) }
        if dryRun {
            // The file as a real run would write it, which asks for the secret first (a dry run never asks).
            for i in draft.secrets.indices where draft.secrets[i].value == nil && !disabled { draft.secrets[i].value = "(asked for)" }
        } else {
            try fillSecrets(&draft)
        }

        let plan: SourcePlan
        do {
            plan = try writer.plan(draft, exactName: name != nil)
        } catch {
            complain(error.description)
            throw ExitCode(Exit.usage)
        }
        if case .alreadyWatched(let owner) = plan.action {
            emit("already watched by the source \(owner) (\(writer.inventory.origin(of: owner) ?? app.config.pluginsDir)): nothing written")
            return
        }
        if dryRun {
            Self.writeOut(plan.text)
            for s in plan.secretFiles { complain("--dry-run: would also create \(s.path) (mode 600) for '\(s.option)'", level: .info) }
            complain("--dry-run: would write \(plan.path); nothing written", level: .info)
            return
        }

        // Loaded and polled once from a scratch copy before anything is written.
        let outcome = try await trial(plan, draft: draft, app: app)
        do {
            try writer.write(plan)
        } catch {
            complain(error.description)
            throw ExitCode(Self.cannotWrite)
        }
        let secrets = plan.secretFiles.map { " and \($0.path) (mode 600)" }.joined()
        emit("wrote \(plan.path)\(secrets)")
        if let outcome { _ = SamplePoll.show(plan.name, outcome) }
        if draft.secrets.contains(where: { $0.value == nil }) {
            emit("put the secret in \(plan.secretFiles.map(\.path).joined(separator: ", ")), then set enabled = true in \(plan.path)")
        }
        emit(Self.askDaemonToReload(stateDir: app.stateDir))
    }

    /// Each secret the lookup could not know: from --password-file, else asked on the terminal;
    /// a run without one exits 64 saying what to pass.
    func fillSecrets(_ draft: inout SourceDraft) throws {
        for i in draft.secrets.indices where draft.secrets[i].value == nil {
            let option = draft.secrets[i].option
            if let passwordFile, option == "password" {
                guard let text = SourceInventory.readText(App.absolute(passwordFile)) else {
                    complain("--password-file \(passwordFile): cannot read it")
                    throw ExitCode(Exit.usage)
                }
                let value = text.trimmed(newlines: true)
                guard !value.isEmpty else {
                    complain("--password-file \(passwordFile) is empty")
                    throw ExitCode(Exit.usage)
                }
                draft.secrets[i].value = value
            } else if let value = Self.askOnTerminal("\(draft.provider) \(option) (not shown; kept in a file of mode 600): ") {
                draft.secrets[i].value = value
            } else {
                complain("the \(draft.provider) source needs a \(option), and there is no terminal to ask on: pass --password-file FILE (or --disabled to fill it in later)")
                if !disabled { throw ExitCode(Exit.usage) }
            }
        }
    }

    /// The plan written into a scratch plugins.d, loaded as the daemon would load it, and polled
    /// once (unless a secret is still a placeholder). A configuration error exits 78, a failed
    /// poll 69; the scratch copy is removed either way.
    func trial(_ plan: SourcePlan, draft: SourceDraft, app: App) async throws -> SamplePoll.Outcome? {
        var template = Array("/tmp/tidings-add.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            complain("cannot create a scratch folder in /tmp: \(String(cString: strerror(errno)))")
            throw ExitCode(Self.cannotWrite)
        }
        let scratch = String(cString: made)
        let scratchPlugins = scratch + "/plugins.d"
        defer { Self.removeTree(scratch) }
        mkdir(scratchPlugins, 0o700)
        var copy = plan
        copy.path = scratchPlugins + "/" + PathText.lastComponent(plan.path)
        copy.secretFiles = plan.secretFiles.map { s in
            var c = s
            c.path = scratchPlugins + String(s.path.dropFirst(app.config.pluginsDir.count))
            return c
        }
        var scratchWriter = SourceFileWriter(pluginsDir: scratchPlugins, inventory: SourceInventory())
        do {
            try scratchWriter.write(copy)
        } catch {
            complain(error.description)
            throw ExitCode(Self.cannotWrite)
        }
        func real(_ text: String) -> String { text.replacing(scratchPlugins, with: app.config.pluginsDir) }
        let config: TidingsConfig
        do {
            var loader = App.loader
            loader.secrets = .required
            config = try loader.load(text: "", file: scratch + "/tidings.toml")
        } catch let e as ConfigErrors {
            for err in e.errors { complain(real(err.description)) }
            complain("nothing written")
            throw ExitCode(Exit.config)
        }
        guard let source = config.sources.first(where: { $0.name == plan.name }) else { return nil }
        // Not polled: a source written disabled (nothing polls it until it is enabled), or one
        // whose secret is still the placeholder.
        if disabled || draft.secrets.contains(where: { $0.value == nil }) { return nil }
        let outcome = await SamplePoll.poll(source, http: App.http)
        if case .failed(let error) = outcome {
            complain("source \(plan.name): sample poll failed: \(real(error.message))")
            complain("nothing written (the address could not be reached or read)")
            throw ExitCode(Self.unreachable)
        }
        return outcome
    }

    /// Sends SIGHUP to the daemon serving the control socket of `stateDir` when it runs as this
    /// user (or this is root); otherwise says how to reload. The socket's peer is the daemon:
    /// only its user or root can listen there (the state directory is theirs).
    static func askDaemonToReload(stateDir: String) -> String {
        let path = ControlProtocol.socketPath(in: stateDir)
        guard let socket = try? UnixSocket.connect(path: path) else {
            return "no daemon is running for \(stateDir): `tidings run` (or `systemctl --user start tidings`) will poll it"
        }
        defer { socket.close() }
        guard let peer = socket.peer(), peer.pid > 0 else { return "reload the daemon to poll it: systemctl reload tidings, or kill -HUP its pid" }
        if peer.uid == getuid() || getuid() == 0, kill(peer.pid, SIGHUP) == 0 {
            return "asked the running daemon (pid \(peer.pid)) to reload"
        }
        return "reload the daemon (pid \(peer.pid), uid \(peer.uid)) to poll it: sudo systemctl reload tidings (or sudo kill -HUP \(peer.pid))"
    }

    /// Reads a line from the terminal without echo; nil without a terminal.
    static func askOnTerminal(_ prompt: String) -> String? {
        guard isatty(0) == 1 else { return nil }
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Echo off before the prompt: what is typed after it is never shown.
        var saved = termios()
        let quiet = tcgetattr(fd, &saved) == 0
        if quiet {
            var t = saved
            t.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(fd, TCSAFLUSH, &t)
        }
        _ = prompt.utf8CString.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress, $0.count - 1) }
        var bytes: [UInt8] = []
        var b: UInt8 = 0
        while Glibc.read(fd, &b, 1) == 1, b != 10, bytes.count < 4096 { bytes.append(b) }
        if quiet { tcsetattr(fd, TCSAFLUSH, &saved) }
        _ = Glibc.write(fd, "\n", 1)
        let value = String(decoding: bytes, as: UTF8.self).trimmed(newlines: true)
        return value.isEmpty ? nil : value
    }

    /// Removes the scratch folder: its files, its folders, itself (it holds nothing else).
    static func removeTree(_ path: String) {
        guard let dir = opendir(path) else {
            unlink(path)
            return
        }
        var names: [String] = []
        while let e = readdir(dir) {
            let n = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if n != ".", n != ".." { names.append(n) }
        }
        closedir(dir)
        for n in names {
            let p = path + "/" + n
            var st = stat()
            if lstat(p, &st) == 0, st.st_mode & S_IFMT == S_IFDIR { removeTree(p) } else { unlink(p) }
        }
        rmdir(path)
    }

    /// `text` on stdout as it is (emit adds a newline).
    static func writeOut(_ text: String) {
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(1, $0.baseAddress! + done, $0.count - done) }
            if n <= 0 { return }
            done += n
        }
    }

    static func complainLines(_ message: String) {
        for line in message.split(separator: "\n") { complain(String(line)) }
    }
}
