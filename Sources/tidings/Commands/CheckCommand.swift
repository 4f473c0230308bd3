import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import TidingsApp
import TidingsCurl
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI
import TidingsSQLite

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Poll sources once, now, and print what is new, changed or removed.",
        discussion: """
            Records what was seen, so the next check reports only later changes. The first check \
            of a source is a silent baseline (unless notify_existing = true). Exit status: 0 nothing \
            new, 1 new events, 2 a source (or with --deliver, a sink) failed.

            While `tidings run` owns the state, check asks the daemon to poll now (over \
            tidings.sock in the state directory) and prints the events of that poll; the daemon \
            records them and delivers them to its sinks as usual, with or without --deliver. A \
            source that fails such a poll is reported here (exit 2) but does not count for the \
            daemon's failures, backoff or schedule; one the server asked to wait (Retry-After) is \
            not polled sooner. --dry-run never asks the daemon: it polls itself and records \
            nothing. `tidings items` reads the state the daemon (or a check) last recorded.

            Interrupted (SIGINT, SIGTERM) while it polls by itself, check first stops the \
            plugins and exec sinks it started, each with its whole process group.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: "Sources to poll (default: every enabled source).", completion: ConfigCompletion.sources)
    var sources: [String] = []

    @Flag(help: "Print events as JSON lines (the event format of webhooks and exec sinks).")
    var json = false

    @Flag(help: "Also send the events to the configured sinks (through the outbox). While a daemon runs, it delivers them in any case.")
    var deliver = false

    @Flag(help: "Poll and print, but record nothing (the next check sees the same changes). Polls directly, also while a daemon runs.")
    var dryRun = false

    /// What one source's poll gave, from this process or from the daemon.
    struct SourceReport {
        var source: String
        var events: [Event]
        var failure: String?
        /// The events a silence kept from the sinks: event id → silence id.
        var silenced: [String: String] = [:]
    }

    func run() async throws {
        // Most checks make requests: libcurl and its ~30 libraries (≈ 4 ms to map, relocate
        // and initialise) load on a thread of their own while the configuration is read;
        // ``pollHere`` waits for the rest, then releases the start-up pages (the process's
        // own are released first, here, before anything is being loaded: a library's pages
        // are never released while the loader maps them). Issue 31, benchmark 1 (80 runs
        // each): wall 37.3 -> 34.9 ms median, peak RSS 17.0 -> 20.5 MiB. A check that polls
        // nothing over the network (a daemon owns the state, only exec sources) has loaded
        // it for nothing, on the side; its pages are released as well.
        _ = FreeMemory.dropStartupPages()
        _ = startDetachedThread(name: "tidings-load") { CurlHTTPClient.loadLibrary() }
        let app = try App.load(common, logLevel: .notice)
        let selected = try app.selectSources(sources)
        let logger = Log.logger("check")
        // Held until this process exits: a daemon that starts meanwhile waits for this check.
        let lock = dryRun ? nil : try await lockStateOrAskDaemon(stateDir: app.stateDir, selected: selected, logger: logger)
        defer { withExtendedLifetime(lock) {} }
        try await Interruption.guarding { try await pollHere(app, selected: selected, logger: logger) }
    }

    /// Polls in this process (no daemon owns the state, or --dry-run), prints, delivers with
    /// --deliver, and exits with the status.
    private func pollHere(_ app: App, selected: [SourceConfig], logger: Logger) async throws {
        // The code that read the configuration has run its course: its pages leave the
        // resident set before the polls map theirs (issue 31, as the daemon does when ready;
        // FreeMemory says why that is safe), and so do those of libcurl and the ~30 libraries
        // it needs (OpenSSL, GnuTLS, Kerberos...), 8 MiB that mostly only their start-up
        // touches: loaded since ``run()`` began, on another thread, waited for here (SQLite
        // loaded too), so that no library is being mapped while pages are released.
        // Benchmark 1: peak 25.4 -> 22.6-23.0 MiB for the configuration's pages, 23.2 -> 21.1
        // MiB for libcurl's loaded before the polls rather than with the first one.
        FreeMemory.release()
        if !app.config.state.isPostgres { SQLiteStateDatabase.loadLibrary() }
        CurlHTTPClient.loadLibrary()  // returns once the thread's load has
        if selected.contains(where: { $0.instance.host != nil }) { App.http.prepare() }
        _ = FreeMemory.dropStartupPages()
        let store = try app.openStore()
        let runner = PollRunner(store: store, http: App.http)
        var options = RecordOptions(router: deliver ? app.router : nil, dryRun: dryRun)
        // Daemons sharing the state (DESIGN §11) own its schedule and its deliveries, as one
        // daemon owns a SQLite state: the poll is on request (not counted), its events are
        // routed, and they deliver them.
        let daemons = dryRun ? [] : try StateOwner.sharingDaemons(store)
        if !daemons.isEmpty {
            logger.notice(
                "\(daemons.count) daemon\(daemons.count == 1 ? "" : "s") share the state in \(store.path) (\(daemons.joined(separator: ", "))): polling now on request; they deliver the events to their sinks"
            )
            options = RecordOptions(router: app.router)
            options.accounting = .uncounted
        }
        // One line per failure, printed by ``show(_:)``; a one-shot check has no next try to log.
        options.callerReportsFailures = true

        // This process owns the state (no daemon shares it): the rows the polls start from are
        // read at once (``SourceStates``); if that read fails, each poll reads its own and
        // reports what fails.
        let known = daemons.isEmpty ? try? await SourceStates.read(store, sources: selected.map(\.name)) : nil
        let outcomes = await PollLimits(app.config).pollAll(selected, runner: runner, options: options, logger: logger, known: known)
        try Task.checkCancellation()  // interrupted (``Interruption``): nothing to print or deliver
        let reports = zip(selected, outcomes).map { source, outcome in
            SourceReport(source: source.name, events: outcome.record.events, failure: outcome.error?.message, silenced: outcome.record.silenced)
        }
        show(reports)
        var failed = false
        if deliver && !dryRun && daemons.isEmpty {
            let worker = OutboxWorker(
                store: store, sinks: Dictionary(uniqueKeysWithValues: app.config.sinks.map { ($0.name, $0.instance) }),
                policy: RetryPolicy(maxAge: app.config.deliveryMaxAge), logger: Log.logger("outbox"))
            for (sink, failure) in await worker.drainOnce().sorted(by: { $0.key < $1.key }) {
                failed = true
                complain("sink \(sink) failed: \(failure.message) (\(Self.consequence(failure.outcome)))")
            }
            // Held by quiet hours or group_wait: not a failure, but not delivered either.
            for (sink, backlog) in ((try? OutboxStore(store: store).backlog()) ?? [:]).sorted(by: { $0.key < $1.key }) where backlog.held > 0 {
                logger.notice(
                    "sink \(sink): \(backlog.held) deliver\(backlog.held == 1 ? "y" : "ies") held by quiet hours or group_wait; they go when the hold ends, with the daemon or a later `tidings check --deliver` (see `tidings outbox`)"
                )
            }
            for s in app.config.sinks { await s.instance.shutdown() }
        }
        throw ExitCode(Self.status(reports, sinkFailed: failed))
    }

    /// Like diff(1): 2 if a source (or sink) failed, else 1 if there were events, else 0.
    static func status(_ reports: [SourceReport], sinkFailed: Bool = false) -> Int32 {
        if sinkFailed || reports.contains(where: { $0.failure != nil }) { return Exit.failure }
        return reports.contains(where: { !$0.events.isEmpty }) ? Exit.newEvents : Exit.nothingNew
    }

    /// Returns the state's lock (nil: a state without one) when this check works on the state
    /// itself. While a daemon owns the state, asks it to poll now instead, and exits as a
    /// direct check would with what that poll produced (the daemon records the events and
    /// delivers them). A daemon that serves all the connections it can is asked again after
    /// a pause (``ControlProtocol/busyRetry``), until the time the answer may take is up.
    private func lockStateOrAskDaemon(stateDir: String, selected: [SourceConfig], logger: Logger) async throws -> StateLock? {
        // Bounded even if the daemon kept sending `wait`: every poll has its timeout, and
        // each may first wait for a scheduled poll of the same source.
        let deadline = ContinuousClock.now + .seconds(60 + 2 * selected.reduce(0) { $0 + $1.settings.timeout + 1 })
        var turnedAway = 0
        while true {
            let owner: StateOwner
            do { owner = try await StateOwner.find(stateDirectory: stateDir, logger: logger) } catch let e as StateOwner.Unreachable {
                complain(e.description)
                throw ExitCode(Exit.failure)
            }
            switch owner {
            case .check(let held):
                return held
            case .daemon(let pid, let client):
                if turnedAway == 0 {
                    logger.notice(
                        "the daemon\(pid.map { " (PID \($0))" } ?? "") owns the state in \(stateDir): it polls now and delivers the events to its sinks")
                }
                let answer = await client.ask(ControlRequest(sources: sources), limit: (deadline - .now) / .seconds(1))
                guard case .busy(let why) = answer else { try show(answer) }
                turnedAway += 1
                let pause = Duration.seconds(ControlProtocol.busyRetry.delay(afterAttempts: turnedAway, unit: .random(in: 0..<1)))
                guard ContinuousClock.now + pause < deadline else {
                    complain("the daemon stayed busy: \(why)")
                    throw ExitCode(Exit.failure)
                }
                logger.debug("the daemon is busy (\(why)); asking again in \(pause)")
                try await Task.sleep(for: pause)
            }
        }
    }

    /// Prints the daemon's answer and exits as a direct check would.
    private func show(_ answer: ControlClient.Answer) throws -> Never {
        switch answer {
        case .replies(let replies):
            var reports: [SourceReport] = []
            var events: [Event] = []
            var silenced: [String: String] = [:]
            for reply in replies {
                switch reply {
                case .event(let e, let silence):
                    events.append(e)
                    silenced[e.id] = silence
                case .result(let source, let outcome):
                    var failure: String? = nil
                    if case .failed(let message) = outcome { failure = message }
                    reports.append(SourceReport(source: source, events: events, failure: failure, silenced: silenced))
                    (events, silenced) = ([], [:])
                case .waiting, .done, .error, .busy:
                    break
                }
            }
            show(reports)
            throw ExitCode(Self.status(reports))
        case .refused(let message), .busy(let message):
            complain("the daemon refused: \(message)")
        case .failed(let message):
            complain(message)
        }
        throw ExitCode(Exit.failure)
    }

    /// Prints each source's events on stdout and its failure on stderr.
    private func show(_ reports: [SourceReport]) {
        let formatter = EventFormatter(color: !json && EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO))
        for r in reports {
            for e in r.events { emit(json ? e.jsonLine() : formatter.line(e, silencedBy: r.silenced[e.id])) }
            if let failure = r.failure { complain("source \(r.source) failed: \(failure)") }
        }
    }

    /// What happens next to a delivery that failed, said once.
    static func consequence(_ outcome: OutboxWorker.Failure.Outcome) -> String {
        switch outcome {
        case .queued: return "the delivery stays queued; `tidings run` retries it"
        case .dead: return "a dead letter, not retried; `tidings outbox retry` requeues it"
        case .sinkDisabled: return "the delivery stays queued; fix the sink, then `tidings run` sends it"
        case .deliveredUnrecorded: return "it was delivered, but the state could not record that; a later run may send it again"
        }
    }
}
