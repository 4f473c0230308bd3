import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import TidingsApp
import TidingsEngine
import TidingsMonitoring
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

struct SourcesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sources",
        abstract: "List configured sources with their health: last success, last error, failures, next poll.")

    @OptionGroup var common: CommonOptions

    @Flag(help: "Print one JSON object per source.")
    var json = false

    func run() async throws {
        var app = try App.load(common, logLevel: .warning, secrets: .lenient, listing: true)
        let store = try app.openStore()
        let statuses = try store.statuses(countingItems: json)  // only the JSON shows them
        app.config.completeConfigHashes(for: Set(statuses.values.filter { $0.authFailedHash != nil }.map(\.source)))
        let shared = store.database.isShared
        let sources = app.config.sources
        let json = self.json
        // Each source's line is its own: they are made on all cores, a block of them each, and
        // written a block at a time (a listing of 10,000 sources in a few write(2)s).
        let block = 1024
        let blocks = Mutex([String](repeating: "", count: (sources.count + block - 1) / block))
        DispatchQueue.concurrentPerform(iterations: (sources.count + block - 1) / block) { k in
            var text = ""
            for i in k * block..<min(sources.count, (k + 1) * block) {
                text += Self.line(sources[i], statuses[sources[i].name], json: json, shared: shared)
                text += "\n"
            }
            blocks.withLock { $0[k] = text }
        }
        for text in blocks.withLock({ $0 }) { StandardStreams.write(text, to: STDOUT_FILENO) }
        // Everything is written: the process ends here rather than free the configuration,
        // the state's rows and the lines one object at a time on one core (issue 33: a few ms
        // of 10,000 sources), which the kernel takes back at once. Nothing is left to flush:
        // the output went out by write(2), and the SQLite state was only read (a PostgreSQL
        // one is left to close its connection, not to leave an EOF in the server's log).
        if !shared { Glibc.exit(0) }
    }

    /// One source's line of the listing: text, or with `json` a JSON object.
    static func line(_ s: SourceConfig, _ st: SourceStatus?, json: Bool, shared: Bool) -> String {
        let health = SourceHealth(s, st)
        let state = health == .paused ? "disabled" : health.rawValue
        if json {
            let obj: JSONValue = [
                "name": .string(s.name), "provider": .string(s.provider), "state": .string(state),
                "interval": .string(DurationParser.format(s.settings.interval)),
                "last_success": st?.lastSuccess.map { .string(Timestamp.format($0)) } ?? .null,
                "last_error": st?.lastError.map { .string($0) } ?? .null,
                "last_error_at": st?.lastErrorAt.map { .string(Timestamp.format($0)) } ?? .null,
                "failures": .number(Double(st?.failures ?? 0)),
                "next_due": st?.nextDue.map { .string(Timestamp.format($0)) } ?? .null,
                "items": .number(Double(st?.items ?? 0)),
                // Where daemons share the state: the instance polling it now ("HOST:PID").
                "owner": st?.owner.map { .string($0) } ?? .null,
                // The remote's own minimum interval between polls (e.g. X-Poll-Interval), if one applies.
                "min_interval": st?.minInterval.map { .string(DurationParser.format($0)) } ?? .null,
                // `group`: a label (a feed reader's folder), null when none.
                "group": s.settings.group.map { .string($0) } ?? .null,
            ]
            return obj.jsonString()
        }
        var line =
            "\(TextEdits.padded(s.name, toUTF16: 20)) \(TextEdits.padded(s.provider, toUTF16: 12)) every \(TextEdits.padded(DurationParser.format(s.settings.interval), toUTF16: 6)) \(TextEdits.padded(state, toUTF16: 11))"
        line += " last ok: \(st?.lastSuccess.map(Self.ago) ?? "never")"
        if let n = st?.nextDue, s.settings.enabled, state != "auth-failed" { line += ", next: \(Self.until(n))" }
        if let m = st?.minInterval, m > s.settings.interval { line += ", server minimum interval: \(DurationParser.format(m))" }
        if let g = s.settings.group { line += ", group: \(TerminalText.line(g))" }
        if let f = st?.failures, f > 0 { line += ", \(f) failure\(f == 1 ? "" : "s")" }
        if let e = st?.lastError, state != "ok" { line += ", error: \(TerminalText.line(e))" }
        if shared, s.settings.enabled { line += st?.owner.map { ", polled by \(TerminalText.line($0))" } ?? ", no instance polls it now" }
        return line
    }

    static func ago(_ d: Date) -> String { DurationParser.format(max(0, -d.timeIntervalSinceNow)) + " ago" }
    static func until(_ d: Date) -> String {
        let s = d.timeIntervalSinceNow
        return s <= 0 ? "due now" : "in " + DurationParser.format(s)
    }
}
