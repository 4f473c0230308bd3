import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsPluginAPI
import TidingsProviders
import TidingsYAML

/// `tidings import urlwatch|opml|urls FILE` (DESIGN §14): many sources at once, each written as
/// `add` writes one; a summary of created, already watched and not importable.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add sources from urlwatch's urls.yaml, a feed reader's OPML, or a list of addresses.",
        discussion: """
            Each job, subscription or address becomes plugins_dir/NAME.toml, as `tidings add` \
            writes one; a list's addresses are each looked at as `tidings add` looks (a feed, a \
            page announcing feeds, a GitHub repository, another page). An address already \
            watched is reported, not written twice, so importing the same file again writes \
            nothing. What cannot be watched the same way is listed with its line and reason. \
            Nothing is written when the file cannot be read whole. A running daemon is asked to \
            reload. Exit 0 when the file was read (even if some entries were not importable), \
            64 usage, 65 the file is not valid YAML/OPML, 66 it cannot be read, 69 libyaml (for \
            urlwatch's format) cannot be loaded, 73 a source file could not be written, 78 the \
            configuration has errors.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case urlwatch, opml, urls
    }

    @OptionGroup var common: CommonOptions

    @Argument(help: "urlwatch (urls.yaml), opml (a feed reader's subscriptions), or urls (one address per line, # comments).")
    var format: Format

    @Argument(help: "The file to import.", completion: .file())
    var file: String

    @Flag(help: "Print the files that would be written; write nothing.")
    var dryRun = false

    @Option(help: ArgumentHelp("The interval of every imported source (urlwatch: default 1d, its daily cron).", valueName: "duration"))
    var interval: String?

    static let dataError: Int32 = 65
    static let noInput: Int32 = 66
    /// libyaml cannot be loaded (urlwatch's format).
    static let unavailable: Int32 = 69
    static let cannotCreate: Int32 = 73
    /// Read at most this much (the YAML reader's own bound; OPML's is smaller).
    static let maxFileBytes = 64 << 20

    func validate() throws {
        if let interval, (try? DurationParser.seconds(interval)) == nil {
            throw ValidationError("--interval \(interval): not a duration (like 30m, 6h, 1d)")
        }
    }

    func run() async throws {
        let app = try App.load(common, logLevel: .warning, secrets: .lenient)
        let pluginsDir = app.config.pluginsDir
        var writer = SourceFileWriter(pluginsDir: pluginsDir, inventory: SourceInventory.read(configFile: app.configFile, pluginsDir: pluginsDir))
        let bytes: [UInt8]
        do { bytes = try Self.readWhole(file, limit: format == .opml ? OPML.maxBytes : Self.maxFileBytes) } catch {
            complain("\(file): \(error)")
            throw ExitCode(Self.noInput)
        }
        let name = PathText.lastComponent(file)
        var reading: ImportReading
        switch format {
        case .urlwatch:
            if let missing = YAML.unavailable() {
                complain("cannot read \(file): \(missing)")
                throw ExitCode(Self.unavailable)
            }
            do {
                reading = try UrlwatchReader(fileName: name, interval: interval ?? UrlwatchReader.defaultInterval, checkSelection: PageProvider.selectionProblem).read(bytes)
            } catch {
                complain("\(file):\(error.line): \(error.message); nothing imported")
                throw ExitCode(Self.dataError)
            }
        case .opml:
            let outlines: [OPML.Outline]
            do { outlines = try OPML.outlines(bytes) } catch {
                complain("\(file)\(error.line.map { ":\($0)" } ?? ""): \(error.message); nothing imported")
                throw ExitCode(Self.dataError)
            }
            reading = OPMLReader(fileName: name, interval: interval).read(
                outlines.map { ($0.title, $0.xmlURL, $0.htmlURL, $0.folders, $0.line) })
        case .urls:
            reading = await lookUp(bytes, fileName: name, inventory: writer.inventory)
        }
        try write(reading, writer: &writer, stateDir: app.stateDir)
    }

    /// A list's addresses, each through `add`'s discovery, one after the other; one already
    /// watched is not fetched again.
    func lookUp(_ bytes: [UInt8], fileName: String, inventory: SourceInventory) async -> ImportReading {
        let list = URLListReader.addresses(bytes)
        var reading = ImportReading(notImportable: list.notImportable)
        let lookup = AddressLookup(http: App.http)
        for (address, line) in list.addresses {
            let request = AddRequest(words: [address])
            if let url = AddressLookup.watchedURL(of: request), inventory.watcher(of: url) != nil {
                // The writer's plan reports this draft as already watched (the same inventory
                // check), so only its address counts.
                reading.drafts.append(SourceDraft(name: address, provider: "page", watchedURL: url))
                continue
            }
            do {
                var draft = try await lookup.look(request, knownProviders: []).draft
                draft.comments.insert("Imported from a list of addresses (\(fileName), line \(line)).", at: 0)
                if let interval { draft.options.append(SourceOption("interval", .string(interval), comment: "Time between polls.")) }
                reading.drafts.append(draft)
            } catch {
                reading.notImportable.append(NotImportable(what: address, line: line, reason: error.description))
            }
        }
        return reading
    }

    func write(_ reading: ImportReading, writer: inout SourceFileWriter, stateDir: String) throws {
        let pluginsDir = writer.pluginsDir
        var created = 0
        var present = 0
        for draft in reading.drafts {
            if let same = Self.sameFile(draft, pluginsDir: pluginsDir) {
                print("present  \(same)  (\(PathText.appending(same + ".toml", to: pluginsDir)) is this source already)")
                present += 1
                continue
            }
            let plan: SourcePlan
            do { plan = try writer.plan(draft) } catch {
                complain("\(draft.name): \(error)")
                throw ExitCode(Self.cannotCreate)
            }
            switch plan.action {
            case .alreadyWatched(let owner):
                print("present  \(owner)  (watches \(draft.watchedURL ?? "") already)")
                present += 1
            case .write:
                if dryRun {
                    print("# would write \(plan.path)")
                    print(plan.text)
                } else {
                    do { try writer.write(plan) } catch {
                        complain("\(plan.path): \(error)")
                        throw ExitCode(Self.cannotCreate)
                    }
                    print("created  \(plan.name)  (\(plan.path))")
                }
                created += 1
            }
        }
        for n in reading.notImportable {
            print("skipped  \(TerminalText.line(n.what))\(n.line.map { "  (\(file):\($0))" } ?? ""): \(TerminalText.line(n.reason))")
        }
        let verb = dryRun ? "would be created" : "created"
        print("\(created) \(verb), \(present) already watched, \(reading.notImportable.count) not importable")
        if created > 0, !dryRun { print(AddCommand.askDaemonToReload(stateDir: stateDir)) }
    }

    /// A draft the inventory cannot recognise counts as present when the file its name would get
    /// holds exactly what would be written (and its secret files the same secrets): an exec
    /// source has no address, and one whose address is a secret (`url_file`) shows none. So a
    /// second import writes nothing.
    static func sameFile(_ draft: SourceDraft, pluginsDir: String) -> String? {
        guard draft.watchedURL == nil || !draft.secrets.isEmpty else { return nil }
        let name = SourceFileWriter.safeName(draft.name, fallback: draft.provider)
        func text(_ path: String) -> String? {
            (try? readWhole(path, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) }
        }
        guard text(PathText.appending(name + ".toml", to: pluginsDir)) == SourceFileWriter.render(draft, name: name) else { return nil }
        for secret in draft.secrets {
            let path = PathText.appending("\(SourceFileWriter.secretsFolder)/\(name).\(secret.option)", to: pluginsDir)
            guard let value = secret.value, text(path)?.trimmed(newlines: true) == value else { return nil }
        }
        return name
    }

    struct ReadFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// The whole file, or an error: never half of it.
    static func readWhole(_ path: String, limit: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadFailure(description: String(cString: strerror(errno))) }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ReadFailure(description: String(cString: strerror(errno)))
            }
            if n == 0 { return out }
            out += buf[0..<n]
            if out.count > limit { throw ReadFailure(description: "larger than \(limit >> 20) MiB; nothing imported") }
        }
    }
}
