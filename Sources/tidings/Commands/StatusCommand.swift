import ArgumentParser
import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsIPC
import TidingsMonitoring
import TidingsPluginAPI
import TidingsSQLite

/// `tidings status [--json]` (DESIGN §13): the whole state at a glance, for a person or a
/// monitoring script. It only reads: it creates no state, takes no lock it keeps, and marks no
/// notice seen.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show at a glance whether all is well: daemon, source health, outbox, silences, notices, last events.",
        discussion: """
            Shows whether a daemon owns the state (its PID, since when, its version when it runs \
            this same binary), or, with [state] url (PostgreSQL), every instance sharing the \
            state and how many sources it polls; the sources by health (ok, new: not polled \
            yet, failing, auth-failed, paused: enabled = false) with the failing and auth-failed \
            ones named (the first 20 in text; all in JSON), their last error and next try; the \
            outbox of each sink: pending (queued or retrying), held (until when and why) and \
            dead; the active silences; the pending notices (not marked seen); the last 10 \
            events. The last line says "healthy", or what needs attention.

            Exit status: 0 healthy; 1 needs attention: a source is failing or auth-failed, a \
            delivery is dead, a poll of the daemon runs past its timeout, the daemon's \
            scheduler has not run for 30 s or is behind (its polls start more than 5 s late, \
            p99 over the last minute), or no daemon runs while enabled sources exist (on \
            PostgreSQL: no instance renewed its leases in the last 30 s); 2 there is no state yet (no \
            tidings.sqlite in the state directory) or it cannot be read; 78 configuration \
            error. Nothing is created when there is no state.

            --json prints one JSON object: "healthy" (bool); "attention" (the reasons, strings); \
            "state" {"backend": "sqlite"|"postgres", "location"}; "daemon" {"running", "pid", \
            "since", "version" (null when unknown), "polls_overrunning" (a number; null when \
            not known), "overrunning" (their sources), "scheduler_ran_at" (null when not \
            known), "instances": [{"instance": "HOST:PID", \
            "started_at", "seen_at", "sources", "sinks"}] (PostgreSQL)}; "sources" {"total", \
            "counts" {"ok", "new", "failing", "auth-failed", "paused"}, "failing": [{"name", \
            "provider", "state", "failures", "last_error", "last_error_at", "next_try"}]}; \
            "outbox" {SINK: {"type", "pending", "held", "dead", "holds": [{"until", "reason": \
            "quiet"|"group", "count", "description"}], "last_dead_error"}} (every configured \
            sink); "silences" (as `silence list --json`); "notices" (as `notices --json`); \
            "events" (oldest first, as `history --json`). Times are RFC 3339 UTC.
            """)

    @OptionGroup var common: CommonOptions

    @Flag(help: "Print one JSON object (its keys: see the description above).")
    var json = false

    func run() async throws {
        var app = try App.load(common, logLevel: .warning, secrets: .lenient, listing: true)
        let store: StateStore
        let lock: StateLock.Probe
        do {
            lock = try StateLock.probe(directory: app.stateDir)
        } catch {
            complain("cannot read the state in \(app.stateDir): \(error)")
            throw ExitCode(Exit.failure)
        }
        if app.config.state.isPostgres {
            store = try app.openStore()
        } else {
            store = try Self.openExisting(app.stateDir)
        }
        let report: StatusReport
        do {
            app.config.completeConfigHashes(for: try store.authFailedSources())
            report = try StatusReport.read(config: app.config, store: store, lock: lock, pulse: DaemonPulse.read(stateDirectory: app.stateDir))
        } catch {
            complain("cannot read the state \(store.path): \(Redactor.shared.scrub("\(error)"))")
            throw ExitCode(Exit.failure)
        }
        if json {
            emit(report.json.jsonString())
        } else {
            for line in report.text(color: EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO)) { emit(line) }
        }
        // Everything is written (by write(2)) and the SQLite state was only read: the process
        // ends here rather than free 10,000 sources one object at a time (as `sources` does).
        if !app.config.state.isPostgres { Glibc.exit(report.reasons.isEmpty ? 0 : Exit.attention) }
        if !report.reasons.isEmpty { throw ExitCode(Exit.attention) }
    }

    /// The SQLite state as it is: exit 2 (and nothing created) when there is none; a file
    /// that cannot be read is reported, not moved aside as the daemon would.
    static func openExisting(_ directory: String) throws -> StateStore {
        let database = "\(directory)/\(StateDirectory.databaseName)"
        var st = stat()
        guard stat(directory, &st) == 0, st.st_mode & S_IFMT == S_IFDIR,
            FileManager.default.fileExists(atPath: database)
        else {
            complain("no state in \(directory): tidings has not polled here yet (start the daemon, or run `tidings check`)")
            throw ExitCode(Exit.failure)
        }
        do {
            try StateDirectory.prepare(directory)
            return try StateStore(path: database)
        } catch {
            complain("cannot read the state database \(database): \(error)")
            throw ExitCode(Exit.failure)
        }
    }
}
