import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// `tidings items SOURCE…`: what each source currently has, as of its last successful poll
/// (e.g. every alert that is firing right now, not only the ones that changed).
struct ItemsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "items",
        abstract: "List what sources currently have (as of their last successful poll).",
        discussion: """
            Reads the state only; run `tidings check SOURCE` first for a fresh view, e.g. every \
            alert firing right now: `tidings check helpdesk >/dev/null; tidings items helpdesk`. \
            JSON lines carry source, key, kind, title, body, url, severity, first_seen, changed_at, \
            missing and data.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: "Sources to list (default: every enabled source).", completion: ConfigCompletion.sources)
    var sources: [String] = []

    @Flag(help: "Print items as JSON lines.")
    var json = false

    func run() async throws {
        let app = try App.load(common, logLevel: .warning, secrets: .lenient)
        let selected = try app.selectSources(sources)
        let store = try app.openStore()
        let now = Date()
        for s in selected {
            for c in try store.currentItems(source: s.name) {
                emit(json ? c.jsonLine() : Self.textLine(c, now: now))
            }
        }
    }

    static func textLine(_ c: CurrentItem, now: Date) -> String {
        let i = c.item
        let age = DurationParser.format(max(0, now.timeIntervalSince(c.firstSeen)).rounded())
        var line = "\(c.source)  \(TextEdits.padded(i.severity.rawValue, toUTF16: 8)) \(TerminalText.line(i.title))"
        if !i.body.isEmpty { line += " — " + TerminalText.line(i.body) }
        line += " (seen for \(age)\(c.missing ? ", missing from the last poll" : ""))"
        return line
    }
}
