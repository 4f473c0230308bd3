import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// `tidings notices [--json]` and `tidings notices dismiss ID|--all`: broadcast notices
/// (events of kind `notice`) that are pending until dismissed or expired.
struct NoticesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notices",
        abstract: "List pending broadcast notices, or dismiss them.",
        discussion: """
            A notice (maintenance, outage, offer) stays pending until dismissed, until it expires \
            (notice_ttl, default 7d; a maintenance at its end) or until the source drops it (an \
            incident resolved). Listing them as text marks them seen; when the daemon starts, \
            pending notices not seen since they were created are delivered again, once. Text lists \
            show ids abbreviated (at least 8 characters, longer when needed to tell them apart); \
            `dismiss` takes such a prefix or the whole id.
            """,
        subcommands: [List.self, Dismiss.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List pending notices (the default).")

        @OptionGroup var common: CommonOptions

        @Option(help: "Only notices of this source.", completion: ConfigCompletion.sources)
        var source: String?

        @Flag(help: "Print notices as JSON lines (does not mark them seen).")
        var json = false

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let store = try app.openStore()
            let all = try NoticeBook.pending(store)
            let notices = source.map { s in all.filter { $0.source == s } } ?? all
            // Abbreviated among all pending notices: what `dismiss` resolves a prefix against.
            let idLength = IDPrefix.length(for: all.map(\.id))
            for n in notices { emit(json ? Self.jsonLine(n) : Self.textLine(n, idLength: idLength)) }
            if !json { try NoticeBook.markSeen(store, ids: notices.map(\.id)) }
        }

        static func jsonLine(_ n: PendingNotice) -> String { json(n).jsonString() }

        /// A notice as JSON (also inside `tidings status --json`).
        static func json(_ n: PendingNotice) -> JSONValue {
            [
                "id": .string(n.id), "source": .string(n.source), "key": .string(n.key), "title": .string(n.title),
                "body": .string(n.body), "url": n.url.map(JSONValue.string) ?? .null, "severity": .string(n.severity.rawValue),
                "created_at": .string(Timestamp.format(n.createdAt)), "updated_at": .string(Timestamp.format(n.updatedAt)),
                "expires_at": .string(Timestamp.format(n.expiresAt)),
                "seen_at": n.seenAt.map { .string(Timestamp.format($0)) } ?? .null,
            ]
        }

        static func textLine(_ n: PendingNotice, idLength: Int) -> String {
            var s = "\(n.id.prefix(idLength))  \(TerminalText.line(n.source))  \(TerminalText.line(n.title))"
            if !n.body.isEmpty { s += " — " + TerminalText.line(n.body) }
            if let url = n.url { s += "  \(TerminalText.line(url))" }
            return s + "  (until \(Timestamp.format(n.expiresAt)))"
        }
    }

    struct Dismiss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "dismiss", abstract: "Dismiss a notice by id (or a unique prefix), or all of them.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "The notice id shown by `tidings notices` (at least 8 characters of it).")
        var id: String?

        @Flag(help: "Dismiss every pending notice.")
        var all = false

        func validate() throws {
            if all == (id != nil) { throw ValidationError("give either a notice ID or --all") }
        }

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let store = try app.openStore()
            if all {
                let n = try NoticeBook.dismissAll(store)
                complain("dismissed \(n) notice\(n == 1 ? "" : "s")")
                return
            }
            do {
                let n = try NoticeBook.dismiss(store, id: id!)
                complain("dismissed \(n.id) (\(n.source): \(n.title))")
            } catch let e as NoticeBook.DismissError {
                complain(e.description)
                let idLength = IDPrefix.length(for: try NoticeBook.pending(store).map(\.id))
                for c in e.candidates { complain("  \(c.id.prefix(idLength))  \(c.source): \(c.title)") }
                throw ExitCode(Exit.usage)
            }
        }
    }
}
