import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Show pending, held, retrying and dead deliveries per sink.",
        discussion:
            "Held deliveries wait for a route's quiet hours to end or its group_wait to close, then go out as one digest per sink. Dead deliveries were refused by their sink (e.g. HTTP 4xx) or retried for too long; `tidings outbox retry` requeues them.",
        subcommands: [List.self, Retry.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the outbox (the default).")

        @OptionGroup var common: CommonOptions

        @Flag(help: "Print one JSON object per delivery (with the event; held ones with held_until and hold).")
        var json = false

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let now = Date()
            let entries = try OutboxStore(store: app.openStore()).entries(now: now)
            if json {
                for e in entries { emit(e.json.jsonString()) }
                return
            }
            if entries.isEmpty {
                emit("outbox is empty")
                return
            }
            let types = Dictionary(app.config.sinks.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a })
            for (sink, rows) in Dictionary(grouping: entries, by: \.sink).sorted(by: { $0.key < $1.key }) {
                let counts = [OutboxEntry.Status.pending, .held, .retrying, .dead].compactMap { s -> String? in
                    let n = rows.filter { $0.status == s }.count
                    return n == 0 ? nil : "\(n) \(s.rawValue)"
                }
                emit("\(TerminalText.line(sink)) (\(types[sink] ?? "not configured")): \(counts.joined(separator: ", "))")
                for r in rows {
                    let what = r.event.map { "\(TerminalText.line($0.source)): \(TerminalText.line($0.title))" } ?? "(unreadable event)"
                    var line = "  #\(r.id) \(TextEdits.padded(r.status.rawValue, toUTF16: 8)) \(what)"
                    line += "  [event \(r.eventID ?? "missing"), \(r.attempts) attempt\(r.attempts == 1 ? "" : "s")"
                    if r.status == .held, let hold = r.hold {
                        line += ", \(hold.description(now: now))"
                    } else if r.status == .retrying, let next = r.nextAttempt {
                        let s = next.timeIntervalSinceNow
                        line += s <= 0 ? ", due now" : ", next in \(DurationParser.format(s))"
                    }
                    line += "]"
                    if let err = r.lastError { line += "\n      last error: \(TerminalText.line(err))" }
                    emit(line)
                }
            }
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Requeue dead deliveries: one (delivery number, or event id) or --all.",
            discussion: "A running daemon picks them up within a minute; `tidings check --deliver` sends them at once.")

        @OptionGroup var common: CommonOptions

        @Argument(help: "A delivery number (#N in `tidings outbox`) or an event id.")
        var id: String?

        @Flag(help: "Requeue every dead delivery.")
        var all = false

        func validate() throws {
            if (id == nil) == !all { throw ValidationError("give a delivery id or --all (not both)") }
        }

        func run() async throws {
            let app = try App.load(common, logLevel: .warning, secrets: .lenient)
            let n = try OutboxStore(store: app.openStore()).requeueDead(all ? nil : id)
            if n == 0 && !all {
                complain("no dead delivery matches '\(id!)' (see `tidings outbox`)")
                throw ExitCode(Exit.usage)
            }
            complain("requeued \(n) dead deliver\(n == 1 ? "y" : "ies")")
        }
    }
}
