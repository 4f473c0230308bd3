import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsPluginAPI
import TidingsProviders
import TidingsYAML

/// `tidings import urlwatch|opml FILE` (DESIGN §14): many sources at once, each written as
/// `add` writes one; a summary of created, already watched and not importable.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add sources from urlwatch's urls.yaml or a feed reader's OPML.",
        discussion: """
            Each job or subscription becomes plugins_dir/NAME.toml, as `tidings add` writes one; \
            an address already watched is reported, not written twice, so importing the same file \
            again writes nothing. What cannot be watched the same way is listed with its line and \
            reason. Nothing is written when the file cannot be read whole. Exit 0 when the file was \
            read (even if some entries were not importable), 64 usage, 65 the file is not valid \
            YAML/OPML, 66 it cannot be read, 73 a source file could not be written.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case urlwatch, opml
    }

    @OptionGroup var common: CommonOptions

    @Argument(help: "urlwatch (urls.yaml) or opml (a feed reader's subscriptions).")
    var format: Format

    @Argument(help: "The file to import.", completion: .file())
    var file: String

    @Flag(help: "Print the files that would be written; write nothing.")
    var dryRun = false

    @Option(help: ArgumentHelp("The interval of every imported source (urlwatch: default 1d, its daily cron).", valueName: "duration"))
    var interval: String?

    static let dataError: Int32 = 65
    static let noInput: Int32 = 66
    static let cannotCreate: Int32 = 73
    /// Read at most this much (the YAML reader's own bound; OPML's is smaller).
    static let maxFileBytes = 64 << 20

    func validate() throws {
        if let interval, (try? DurationParser.seconds(interval)) == nil {
            throw ValidationError("--interval \(interval): not a duration (like 30m, 6h, 1d)")
        }
    }

    func run() async throws {
        Log.bootstrap(level: common.logLevel(default: .warning))
        let bytes: [UInt8]
        do { bytes = try Self.readWhole(file, limit: format == .opml ? OPML.maxBytes : Self.maxFileBytes) } catch {
            complain("\(file): \(error)")
            throw ExitCode(Self.noInput)
        }
        let name = PathText.lastComponent(file)
        var reading: ImportReading
        switch format {
        case .urlwatch:
            do {
                reading = try UrlwatchReader(fileName: name, interval: interval ?? "1d", checkSelection: PageProvider.selectionProblem).read(bytes)
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
        }
        try write(reading)
    }

    func write(_ reading: ImportReading) throws {
        let configFile = ConfigLoader.locate(explicit: common.config)
        let pluginsDir = Self.pluginsDir(configFile: configFile)
        var writer = SourceFileWriter(pluginsDir: pluginsDir, inventory: SourceInventory.read(configFile: configFile, pluginsDir: pluginsDir))
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
        if created > 0, !dryRun {
            print("A running daemon reads them on reload: systemctl --user reload tidings (or kill -HUP its pid).")
        }
    }

    /// A draft without an address (an exec source) counts as present when the file its name
    /// would get holds exactly what would be written: a second import writes nothing.
    static func sameFile(_ draft: SourceDraft, pluginsDir: String) -> String? {
        guard draft.watchedURL == nil else { return nil }
        let name = SourceFileWriter.safeName(draft.name, fallback: draft.provider)
        let path = PathText.appending(name + ".toml", to: pluginsDir)
        guard let bytes = try? readWhole(path, limit: 1 << 20) else { return nil }
        return String(decoding: bytes, as: UTF8.self) == SourceFileWriter.render(draft, name: name) ? name : nil
    }

    /// plugins_dir as the loader finds it: the main file's `plugins_dir`, else `plugins.d` beside it.
    static func pluginsDir(configFile: String) -> String {
        let base = PathText.appending("plugins.d", to: PathText.parent(configFile))
        guard let bytes = try? readWhole(configFile, limit: 8 << 20),
            let root = try? ConfigTable.parse(String(decoding: bytes, as: UTF8.self), file: configFile),
            case .string(let p)? = root["plugins_dir"]?.value
        else { return base }
        let expanded = PathResolver.expandTilde(p)
        return expanded.hasPrefix("/") ? expanded : PathText.appending(expanded, to: PathText.parent(configFile))
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
