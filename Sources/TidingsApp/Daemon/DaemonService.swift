import FoundationEssentials
import Logging
import ServiceLifecycle
import Synchronization
import TidingsEngine
import TidingsMonitoring
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite
import UnixSignals

/// The daemon: one generation (scheduler + outbox worker) per loaded configuration. It is
/// one of the services of ``Daemon/serviceGroup(_:)``; the others (control socket, `[http]`,
/// system bus, housekeeping, status line, reload signal) call into it.
///
/// A reload (``requestReload()``: SIGHUP) loads the config anew; if it is valid the current generation drains and a new one
/// starts on the same state, otherwise the error is logged and the old one keeps running.
/// Graceful shutdown stops polling and waits (bounded) for in-flight work. Requests on the
/// control socket (``answer(_:)``) are polled by the current generation's scheduler. Every
/// ``statusInterval`` the state is looked at for the `STATUS=` line and the outbox gauges.
/// Sleep and network changes from the system bus go to the current scheduler, and each new
/// one starts with the conditions as they are (``HostConditions``).
package final class DaemonService: Service, Sendable {
    enum Control: Sendable { case reload, shutdown }

    /// The configuration that is polling, and its scheduler.
    private struct Generation: Sendable {
        var config: TidingsConfig
        var scheduler: Scheduler
        var outbox: OutboxWorker
        /// When it was ready, and whether the pages its first polls ran were released since
        /// (``dropCodePages(pass:)``).
        var ready = ContinuousClock.now
        var settled = false
    }

    /// What is running and what the host says, under one lock: a scheduler built during a
    /// change of network or sleep state still learns of it.
    private struct Live: Sendable {
        var generation: Generation?
        var host: HostConditions
    }

    private let initial: TidingsConfig
    private let configFile: String
    /// Loads the configuration anew on SIGHUP (the process's provider and sink registries).
    private let loader: ConfigLoader
    /// The process's one HTTP client, and how to cap its connections per host (`max_per_host`).
    private let http: any HTTPClient
    private let limitConnectionsPerHost: @Sendable (Int) -> Void
    private let store: StateStore
    /// Reload and shutdown requests for the generation loop, in order.
    private let controls: AsyncStream<Control>
    private let feed: AsyncStream<Control>.Continuation
    private let logger: Logger
    /// READY/RELOADING/STOPPING/STATUS/WATCHDOG for systemd (`Type=notify`), and `/-/ready`.
    private let notifications: ServiceNotifications
    /// `[http]`, moved or stopped by a reload.
    private let endpoint: MonitoringEndpoint
    /// State failures while looking for the status line: one error per outage.
    private let statusLog = OnceLog()
    private let live: Mutex<Live>
    /// Set on SIGTERM/SIGINT: requests are refused at once instead of waiting for a generation.
    private let stopping = Mutex(false)
    /// `history_days` and `dead_letter_days` of the configuration loaded last, for housekeeping.
    private let retention: Mutex<(history: Int, deadLetters: Int)>
    /// Wakes housekeeping early (a reload may have changed `history_days`).
    private let housekeeping = Wakeup()
    /// This daemon where several share one state (DESIGN §11): its leases outlive a reload.
    private let instance = Instance.current()
    /// How long a request on the control socket waits for a generation (start-up, reload).
    static let generationWait: Duration = .seconds(30)
    /// How often the status line and the outbox gauges are brought up to date.
    static let statusInterval: Double = 5
    /// How long after a generation is ready its code pages are released again (``dropCodePages(pass:)``).
    static let settleTime = Duration.seconds(30)
    /// The scheduler loop's passes and the polls overrunning their timeout, across reloads.
    private let pulse: PulseKeeper
    /// Where the pulse is written every ``statusInterval`` for `tidings status` (nil: nowhere).
    private let pulseDirectory: String?

    package init(
        initial: TidingsConfig, configFile: String, loader: ConfigLoader, http: any HTTPClient,
        limitConnectionsPerHost: @escaping @Sendable (Int) -> Void, store: StateStore,
        host: HostConditions,
        notifications: ServiceNotifications, endpoint: MonitoringEndpoint, logger: Logger,
        pulse: PulseKeeper = PulseKeeper(), pulseDirectory: String? = nil
    ) {
        self.pulse = pulse
        self.pulseDirectory = pulseDirectory
        self.initial = initial
        self.live = Mutex(Live(generation: nil, host: host))
        self.retention = Mutex((initial.historyDays, initial.deadLetterDays))
        self.configFile = configFile
        self.loader = loader
        self.http = http
        self.limitConnectionsPerHost = limitConnectionsPerHost
        self.store = store
        (controls, feed) = AsyncStream<Control>.makeStream()
        self.logger = logger
        self.notifications = notifications
        self.endpoint = endpoint
    }

    /// Runs generations until the group shuts down: the first on the initial configuration,
    /// then one per valid reload.
    package func run() async throws {
        let feed = self.feed
        await withGracefulShutdownHandler {
            var config = initial
            var iterator = controls.makeAsyncIterator()
            while let fresh = await runGeneration(config, next: { await iterator.next() ?? .shutdown }) {
                await reconfigureMonitoring(from: config, to: fresh)
                config = fresh
                retention.withLock { $0 = (fresh.historyDays, fresh.deadLetterDays) }
                housekeeping.signal()
            }
        } onGracefulShutdown: {
            self.stopping.withLock { $0 = true }
            self.notifications.stopping()
            feed.yield(.shutdown)
        }
    }

    /// Loads the configuration file again; a valid one replaces the running generation, an
    /// invalid one is logged and the running one kept (SIGHUP).
    package func requestReload() { feed.yield(.reload) }

    /// Answers a request on the control socket: polls the sources now, on request (they do
    /// not count for schedule or health), and returns their events and results.
    /// The configuration being polled (the first one until the first generation starts).
    package func currentConfig() -> TidingsConfig { live.withLock { $0.generation?.config } ?? initial }

    /// Wakes the outbox of the running generation (a dead letter requeued on the status page).
    package func nudgeOutbox() { live.withLock { $0.generation?.outbox }?.nudge() }

    package func answer(_ request: ControlRequest) async -> [ControlReply] {
        guard let generation = await pollingGeneration() else {
            return [.error("the daemon is not polling (starting, reloading or stopping); try again")]
        }
        let config = generation.config
        let sources = request.sources.isEmpty ? config.sources.filter { $0.settings.enabled } : request.sources.compactMap(config.source(named:))
        let unknown = request.sources.filter { config.source(named: $0) == nil }
        guard unknown.isEmpty else {
            let names = unknown.map { "'\($0)'" }.joined(separator: ", ")
            return [.error("the running daemon has no source named \(names) (it runs \(configFile) as last loaded; reload it with SIGHUP after editing)")]
        }
        var replies: [ControlReply] = []
        for (source, outcome) in zip(sources, await generation.scheduler.pollNow(sources)) {
            replies += outcome.record.events.map { ControlReply.event($0, silencedBy: outcome.record.silenced[$0.id]) }
            replies.append(.result(source: source.name, outcome: outcome.error.map { .failed(Redactor.shared.scrub($0.message)) } ?? .ok))
        }
        replies.append(.done)
        return replies
    }

    /// The network or sleep state changed: the scheduler polling now pauses or resumes, and the
    /// status line says so.
    package func hostChanged(_ change: HostChange) async {
        let (generation, before, host) = live.withLock { l in
            let before = l.host
            l.host.apply(change)
            return (l.generation, before, l.host)
        }
        guard let generation else { return }
        await generation.scheduler.update(host)
        // Back online or awake: deliveries waiting out a retry backoff go now, as polls do.
        if before.pause != nil && host.pause == nil { await generation.outbox.retryNow() }
        notifications.update(DaemonStatus(generation.config, await snapshot(), pause: host.pause))
    }

    /// The generation polling now; waits a while during start-up or a reload.
    private func pollingGeneration() async -> Generation? {
        let deadline = ContinuousClock.now.advanced(by: Self.generationWait)
        while ContinuousClock.now < deadline, !stopping.withLock({ $0 }) {
            if let g = live.withLock({ $0.generation }) { return g }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Loads the config again; nil (after logging why) if it is invalid.
    private func loadFresh() -> TidingsConfig? {
        do {
            let fresh = try loader.load(file: configFile)
            for w in fresh.warnings { logger.warning("\(w)") }
            limitConnectionsPerHost(fresh.maxPerHost)
            logger.notice("reloaded configuration: \(fresh.sources.count) sources, \(fresh.sinks.count) sinks")
            return fresh
        } catch let e as ConfigErrors {
            for err in e.errors { logger.error("reload failed, keeping the running configuration: \(err.description)") }
        } catch {
            logger.error("reload failed, keeping the running configuration: \(error)")
        }
        return nil
    }

    /// Runs scheduler and outbox for one config until shutdown (returns nil) or a reload with
    /// a valid config (returns it). On a reload with an invalid config this generation keeps running.
    private func runGeneration(_ config: TidingsConfig, next: () async -> Control) async -> TidingsConfig? {
        // What loading the configuration freed goes back to the kernel before the lease round and
        // the state's snapshot allocate theirs: left resident, the load's freed pages and theirs
        // added up to the daemon's peak (issue 33, benchmark 8).
        FreeMemory.release()
        let sinks = Dictionary(uniqueKeysWithValues: config.sinks.map { ($0.name, $0.instance) })
        // Several daemons on one state: this one polls the sources and delivers to the sinks
        // whose leases it holds. The first round comes before the first poll.
        let leases =
            store.database.isShared
            ? LeaseKeeper(database: store.database, instance: instance, sources: config.sources, sinks: config.sinks.map(\.name), logger: Log.logger("leases"))
            : nil
        if let leases {
            await leases.round { _, _ in }
            logger.notice("shared state \(store.path): instance \(instance.label), lease rounds every \(DurationParser.format(leases.period))")
        }
        // Held rows follow the routes as loaded now: a rule that lost its quiet hours or
        // group_wait lets them go at once, not at the old end.
        do {
            let released = try await OutboxStore(store: store).followRoutes(config.routes, now: Date())
            if released > 0 {
                logger.notice("released \(released) held deliver\(released == 1 ? "y" : "ies") early: their route no longer holds them that long")
            }
        } catch {
            logger.error("cannot release held deliveries for the routes as configured now (state database \(store.path)): \(error)")
        }
        let outbox = OutboxWorker(
            store: store, sinks: sinks, policy: RetryPolicy(maxAge: config.deliveryMaxAge), logger: Log.logger("outbox"),
            leases: leases)
        let runner = PollRunner(store: store, http: http, overruns: pulse.overruns)
        let pulse = self.pulse
        let router = Router(routes: config.routes, allSinks: config.sinks.map(\.name))
        let notifications = self.notifications
        // The status line needs only the rows of sources that can be failing; the health gauges
        // read every row, a page at a time.
        let state = await snapshot()
        if state != nil {
            do { try await StateSnapshot.exportHealth(of: config, from: store) } catch {
                logger.error("cannot read source health from \(store.path) for the health gauges: \(error)")
            }
        }
        state?.exportBacklog(sinks: config.sinks)
        let (scheduler, pause) = live.withLock { l in
            let scheduler = Scheduler(
                config: config, runner: runner, router: router, host: l.host, leases: leases,
                timerSlack: Scheduler.daemonTimerSlack, lateness: pulse.lateness, logger: Log.logger("scheduler"),
                onEvents: { outbox.nudge() },
                heartbeat: {
                    notifications.heartbeat()
                    pulse.tick()
                })
            l.generation = Generation(config: config, scheduler: scheduler, outbox: outbox)
            return (scheduler, l.host.pause)
        }
        notifications.ready(DaemonStatus(config, state, pause: pause))
        // What loading the configuration freed goes back to the kernel, and the pages of code
        // and read-only data start-up and the load ran leave the RSS: what the polls run maps back
        // (``FreeMemory``).
        FreeMemory.release()
        dropCodePages("loaded")
        let rounds = leases.map { keeper in
            Task {
                await keeper.run { _, _ in
                    await scheduler.leasesChanged(keeper.sources)
                    outbox.nudge()
                }
            }
        }

        let fresh: TidingsConfig? = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await scheduler.run()
                return true
            }
            group.addTask {
                await outbox.run()
                return true
            }
            var fresh: TidingsConfig? = nil
            // Load before tearing anything down: a bad config must not stop the running one.
            while fresh == nil, await next() == .reload {
                notifications.reloading()
                fresh = loadFresh()
                // Refused: the running configuration goes on, and is ready again.
                if fresh == nil { notifications.ready(DaemonStatus(config, await snapshot(), pause: live.withLock { $0.host.pause })) }
            }
            live.withLock { $0.generation = nil }
            await scheduler.stop()
            outbox.stop()
            let timeout = config.shutdownTimeout
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return false
            }
            var finished = 0
            while let done = await group.next() {
                if done {
                    finished += 1
                    if finished == 2 { break }
                } else {
                    logger.warning("in-flight work did not finish within \(DurationParser.format(timeout)); it stays queued and resumes on next start")
                    break
                }
            }
            group.cancelAll()
            return fresh
        }
        // Polls and deliveries in flight are done: the leases go (on a stop) or stay with this
        // instance for the next generation (a reload).
        leases?.stop(release: fresh == nil)
        await rounds?.value
        for s in config.sinks { await s.instance.shutdown() }
        return fresh
    }

    /// After a reload: `[http]` follows the new configuration (a failure is reported and the old
    /// endpoint kept), and the series of sources and sinks it no longer has stop being exported.
    private func reconfigureMonitoring(from old: TidingsConfig, to fresh: TidingsConfig) async {
        do {
            try await endpoint.apply(fresh.http)
        } catch {
            logger.error("reload: \(error); [http] stays as it was")
        }
        func polled(_ c: TidingsConfig) -> Set<String> { Set(c.sources.filter { $0.settings.enabled }.map(\.name)) }
        TidingsMetrics.forget(sources: polled(old).subtracting(polled(fresh)))
        TidingsMetrics.forget(sinks: Set(old.sinks.map(\.name)).subtracting(fresh.sinks.map(\.name)))
    }

    /// A generation's first polls and deliveries run code its idle loop does not (baselines,
    /// parsers, schema checks, TLS set-up, the first status pass): at the first pass at least
    /// ``settleTime`` after it was ready with no poll in flight, once per generation, the pages
    /// of code and read-only data go again; then hourly (what a rare path mapped back).
    private func dropCodePages(pass: Int) async {
        guard let (scheduler, ready, settled) = live.withLock({ l in l.generation.map { ($0.scheduler, $0.ready, $0.settled) } })
        else { return }
        if settled {
            if pass % Int(3600 / Self.statusInterval) == 0 { dropCodePages("hourly") }
            return
        }
        guard ContinuousClock.now - ready >= Self.settleTime, await scheduler.pollsInFlight == 0 else { return }
        let first = live.withLock { l in
            guard let g = l.generation, g.scheduler === scheduler, !g.settled else { return false }
            l.generation?.settled = true
            return true
        }
        if first { dropCodePages("first polls done") }
    }

    /// ``FreeMemory/dropStartupPages()``, logged at debug level.
    private func dropCodePages(_ when: String) {
        guard let d = FreeMemory.dropStartupPages() else { return }
        logger.debug("released code pages (\(when)): \(d.advised >> 10) KiB of code and read-only data advised, resident \(d.residentBefore >> 10) → \(d.residentAfter >> 10) KiB")
    }

    /// The state as the status line and gauges show it; nil (after logging why) when it cannot be read.
    /// `problemsOnly`: the health of the sources that can be failing only (all the status line
    /// needs; ``StateSnapshot/read(_:problemsOnly:)``); every source's for the health gauges.
    private func snapshot(problemsOnly: Bool = true) async -> StateSnapshot? {
        do {
            let s = try await StateSnapshot.read(store, problemsOnly: problemsOnly)
            statusLog.succeeded("status", "reading source health and outbox backlog from \(store.path) works again", logger: logger)
            return s
        } catch {
            statusLog.failed("status", "cannot read source health and outbox backlog from \(store.path): \(error)", logger: logger)
            return nil
        }
    }

    /// Every ``statusInterval``: the status line (when it changed), the outbox gauges, and the
    /// pulse (overrunning polls: gauge, status line, `tidings.pulse`).
    package func observe() async {
        var passes = 0
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(Self.statusInterval))
            passes += 1
            // Once a minute: free heap pages (a reload's load, the first polls, lease changes) leave the RSS.
            if passes % 12 == 0 { FreeMemory.release() }
            await dropCodePages(pass: passes)
            let current = pulse.pulse()
            TidingsMetrics.overrunning(current.overrunning.count)
            TidingsMetrics.behind(seconds: current.lateness ?? 0)
            if let pulseDirectory {
                do {
                    try current.write(stateDirectory: pulseDirectory)
                    statusLog.succeeded("pulse", "writing \(DaemonPulse.path(in: pulseDirectory)) works again", logger: logger)
                } catch {
                    statusLog.failed("pulse", "cannot write \(DaemonPulse.path(in: pulseDirectory)) (tidings status reads it): \(error)", logger: logger)
                }
            }
            let (config, pause) = live.withLock { ($0.generation?.config, $0.host.pause) }
            guard let config else { continue }
            let now = await snapshot()
            now?.exportBacklog(sinks: config.sinks)
            notifications.update(DaemonStatus(config, now, pause: pause, overrunning: current.overrunning.count))
        }
    }

    /// Housekeeping, hourly and after each reload: prune dead letters older than the
    /// `dead_letter_days` and history older than the `history_days` of the configuration loaded now.
    package func maintenance() async {
        while !Task.isCancelled {
            let (days, deadDays) = retention.withLock { $0 }
            do {
                let r = try await store.pruneInBackground(olderThanDays: days, deadLetterDays: deadDays)
                if r.events + r.items > 0 { logger.info("pruned \(r.events) old events and \(r.items) gone items (history_days = \(days))") }
                for (sink, n) in r.deadLetters.sorted(by: { $0.key < $1.key }) {
                    logger.notice("pruned \(n) dead letter\(n == 1 ? "" : "s") of sink \(sink) older than \(deadDays) days (dead_letter_days)")
                }
                TidingsMetrics.prunedDeadLetters(r.deadLetters)
            } catch {
                logger.error("pruning failed: \(error)")
            }
            await housekeeping.wait(seconds: 3600)
        }
    }
}
