import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

struct HistoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show recent events (kept for history_days, default 30).",
        discussion: """
            Events a silence kept from the sinks (`tidings silence`) are marked [silenced by ID]; \
            with --json they carry "silenced_by": "ID".
            """)

    @OptionGroup var common: CommonOptions

    @Option(help: "Only events of this source.", completion: ConfigCompletion.sources)
    var source: String?

    @Option(help: "How many events to show.")
    var limit: Int = 50

    @Flag(help: "Print events as JSON lines.")
    var json = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be positive") }
    }

    func run() async throws {
        let app = try App.load(common, logLevel: .warning, secrets: .lenient)
        let formatter = EventFormatter(color: !json && EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO))
        for entry in try app.openStore().history(source: source, limit: limit) {
            switch entry {
            case .event(let e, let silence):
                emit(json ? SilenceMark.jsonLine(e, silencedBy: silence) : formatter.line(e, silencedBy: silence))
            case .unreadable(let id, let source, let reason):
                // Not hidden: said on stderr, so stdout stays events only (and JSON with --json).
                complain("event \(id) of \(source) cannot be read from the state (\(reason)); it is left out")
            }
        }
    }
}
