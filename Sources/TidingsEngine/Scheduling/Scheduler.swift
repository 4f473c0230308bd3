import FoundationEssentials
import Logging
import Synchronization
import TidingsPluginAPI

/// The daemon's polling loop (DESIGN §6): jittered waits, start-up spread, catch-up after
/// suspend or clock jumps, `max_concurrent` and `max_per_host`, backoff via ``PollRunner``,
/// and pauses while the host is offline or going to sleep (``update(_:)``).
package actor Scheduler {
    private let config: TidingsConfig
    /// Sources by name: the loop looks one up per poll (a linear search copied 10,000 configs per poll).
    /// Index of each source in `config.sources` (not a copy: a source is ~300 bytes, and a
    /// second copy of 30,000 of them cost 10 MB; nor a dictionary, ``SourceIndex``).
    private let names: SourceIndex
    private let runner: PollRunner
    private let options: RecordOptions
    /// For polls on request (``pollNow(_:)``): routed as usual, not counted.
    private let requestOptions: RecordOptions
    private let env: any Environment
    private let logger: Logger
    private let onEvents: @Sendable () -> Void
    /// Called on every pass of the loop (at least once a second): the service watchdog's ping,
    /// so a hung scheduler stops the pings.
    private let heartbeat: @Sendable () -> Void
    private var queue = DueQueue()
    /// Sources being polled, on schedule or on request: never two polls of one source at once.
    private var inFlight = Set<String>()
    /// Sources whose scheduled poll came due while a poll on request ran: polled when it ends.
    private var deferred = Set<String>()
    /// Polls on request waiting for the poll of their source in flight.
    private var waitingForSource: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Polls on request in flight, and who waits for them to end (``run()`` when stopping).
    private var requests = 0
    private var requestsDone: [CheckedContinuation<Void, Never>] = []
    /// The loop's sleep, on the environment's clock.
    private let wakeup: Wakeup
    /// `max_concurrent` and `max_per_host`.
    private let limits: PollLimits
    private var stopping = false
    /// Network and sleep as the system bus last said: no scheduled poll starts while paused.
    private var host: HostConditions
    /// The same for polls in flight: a failure while paused is not counted.
    private let sharedHost: SharedHostConditions
    /// When the loop last woke and how long it meant to wait: a longer gap is a suspend or a clock jump.
    private var lastWake: Date
    private var expectedSleep: Double = 0
    /// Lateness of each poll start against its due time, seconds (for metrics and benchmarks),
    /// since start (`all`) and since the last periodic report (`recent`). Recorded where the poll
    /// starts, off the actor (``execute(_:due:)``).
    private let latenessStats = Mutex<(all: LatenessStats, recent: LatenessStats)>((LatenessStats(), LatenessStats()))
    package nonisolated var lateness: LatenessStats { latenessStats.withLock { $0.all } }
    /// The daemon's last minute of lateness (``PulseKeeper``: "behind by …"), when it has one.
    private let window: LatenessWindow?
    /// A poll came due while every `max_concurrent` slot was taken: it waits in the queue
    /// (in due order, still subject to pauses and leases) and the end of any poll wakes the loop.
    private var waitingForSlot = false
    /// Where daemons share the state: the sources whose leases this instance holds (the only
    /// ones it polls on schedule). Nil: it polls every source.
    private var leased: Set<String>?
    /// Where sources are kept as recipes (``SourceConfig/recipe``: daemons sharing a PostgreSQL
    /// state, issue 33): the providers of those whose leases this instance holds, built at the
    /// first poll after it took the lease and dropped when it loses it (a poll in flight keeps
    /// its own). Not at the takeover itself: the first daemon to start holds every lease for
    /// a round or two, and a takeover after a kill -9 would build thousands on the actor at once;
    /// polls come spread over the interval, and so do the builds.
    private var providers: [String: any Provider] = [:]
    /// How often the scheduler logs one `scheduler: polls=…` line at info level.
    package static let reportInterval: TimeInterval = 60
    /// The daemon's timer slack: the loop sleeps at least this long between timed wake-ups
    /// and then starts every poll that fell due meanwhile (as systemd's `AccuracySec=` and
    /// the kernel's timer slack do). 10,000 sources at 60 s fall due every 6 ms on average:
    /// one wake-up (a timer task and two thread switches) per poll cost more CPU than the polls'
    /// own work. With 100 ms the loop wakes at most 10 times a second and a poll starts at most
    /// 100 ms after its due time, against a jitter of ±10 % of its interval (issue 33's goal:
    /// lateness p99 ≤ 250 ms). Each pass costs ~9 thread switches besides its polls (the
    /// timer task, its dispatch timer, the threads woken to start the polls): at 25 ms (40
    /// passes a second) that was 570–690 switches/s and 7.6–9.2 % of a core for 10,000 sources
    /// at 60 s, at 100 ms 370–480 and 4.8–5.9 % (docs/engineering/benchmarks.md, issue 33).
    package static let daemonTimerSlack: TimeInterval = 0.1
    /// This scheduler's slack (0: wake for every due time, as tests on a virtual clock expect).
    private let timerSlack: TimeInterval

    package init(
        config: TidingsConfig, runner: PollRunner, router: Router, env: any Environment = SystemEnvironment(),
        logger: Logger, onEvents: @escaping @Sendable () -> Void, heartbeat: @escaping @Sendable () -> Void = {}
    ) {
        self.init(
            config: config, runner: runner, router: router, env: env, host: HostConditions(), logger: logger,
            onEvents: onEvents, heartbeat: heartbeat)
    }

    /// `host`: the network and sleep state now (a scheduler built on a reload carries it on).
    /// `leases`: where daemons share the state, this instance's (its polls start with the
    /// sources it holds; ``leasesChanged(_:)`` tells it the rest).
    package init(
        config: TidingsConfig, runner: PollRunner, router: Router, env: any Environment = SystemEnvironment(),
        host: HostConditions, leases: LeaseKeeper? = nil, timerSlack: TimeInterval = 0, lateness: LatenessWindow? = nil,
        logger: Logger, onEvents: @escaping @Sendable () -> Void, heartbeat: @escaping @Sendable () -> Void = {}
    ) {
        self.timerSlack = timerSlack
        self.window = lateness
        self.config = config
        self.names = SourceIndex(config.sources)
        self.runner = runner
        self.host = host
        self.sharedHost = SharedHostConditions(host)
        var options = RecordOptions(router: router)
        options.host = sharedHost
        options.fence = leases?.instance.id
        self.options = options
        self.leased = leases?.sources
        var requestOptions = RecordOptions(router: router)
        requestOptions.accounting = .uncounted
        self.requestOptions = requestOptions
        self.env = env
        self.logger = logger
        self.onEvents = onEvents
        self.heartbeat = heartbeat
        self.limits = PollLimits(config)
        self.wakeup = Wakeup(env: env)
        self.lastWake = env.now()
    }

    /// The index in `config.sources` of the source named `name`.
    private func index(_ name: String) -> Int? { names.index(of: name, in: config.sources) }

    /// Polls until cancelled or ``stop()``; then waits for in-flight polls to finish.
    package func run() async {
        await seed()
        logger.info("scheduler: \(queue.count) source\(queue.count == 1 ? "" : "s") scheduled\(host.pause.map { "; polls paused (\($0.rawValue))" } ?? "")")
        // A discarding group frees each poll's task when it finishes; a plain task group keeps
        // every finished child until its result is consumed (~15 KiB per poll, forever).
        await withDiscardingTaskGroup { group in
            lastWake = env.now()
            var lastReport = lastWake
            while !stopping && !Task.isCancelled {
                heartbeat()
                let now = env.now()
                if now.timeIntervalSince(lastReport) >= Self.reportInterval {
                    report(seconds: now.timeIntervalSince(lastReport))
                    lastReport = now
                }
                let drift = now.timeIntervalSince(lastWake) - expectedSleep
                if drift > 5 || drift < -5 {
                    if host.power == .goingToSleep {
                        // The clock jumped after PrepareForSleep: the host slept and is awake
                        // again, whether or not logind's resume signal has come yet.
                        change(.power(.awake), now: now, why: " (the clock jumped by \(DurationParser.format(abs(drift))))")
                    } else {
                        catchUp(now: now, drift: drift)
                    }
                }
                // Due polls start in due order (the heap's), the most overdue first. While every
                // `max_concurrent` slot is taken they stay queued rather than each waiting in a
                // task of its own: the next free slot goes to the earliest due, a pause or a lost
                // lease still holds them back, and the loop sleeps until a poll ends.
                waitingForSlot = false
                while host.pause == nil, let top = queue.peek, top.due <= now {
                    guard let source = index(top.name).map({ config.sources[$0] }), leased?.contains(top.name) ?? true else {
                        _ = queue.pop()
                        continue
                    }
                    guard !inFlight.contains(top.name) else {
                        _ = queue.pop()
                        deferred.insert(top.name)
                        continue
                    }
                    guard limits.tryTakeSlot() else {
                        waitingForSlot = true
                        break
                    }
                    _ = queue.pop()
                    inFlight.insert(top.name)
                    let due = top.due
                    let polled = provided(source)
                    group.addTask { await self.execute(polled, due: due) }
                }
                let sleep =
                    host.pause == nil && !waitingForSlot ? max(min(queue.peek.map { $0.due.timeIntervalSince(now) } ?? 1, 1), timerSlack) : 1
                lastWake = now
                expectedSleep = max(0, sleep)
                await wakeup.wait(seconds: max(0.001, sleep))
            }
            // Leaving the group waits for the in-flight polls.
        }
        while requests > 0 {
            await withCheckedContinuation { requestsDone.append($0) }
        }
    }

    /// Polls in flight, scheduled or on request (a test on a virtual clock waits for none
    /// before it moves the clock on or asserts that nothing was polled; the daemon releases the
    /// pages its first polls ran once none is).
    package var pollsInFlight: Int { inFlight.count }

    private static let stoppingError = PollError(.transient, "not polled: the daemon is stopping or reloading its configuration; try again")

    /// Polls `sources` now, on request (`tidings check` while the daemon owns the state),
    /// within `max_concurrent` and `max_per_host`, after any poll of the same source in
    /// flight. Events are routed as usual; the schedule and health are not touched
    /// (``PollAccounting/uncounted``). Outcomes in the given order.
    package func pollNow(_ sources: [SourceConfig]) async -> [PollOutcome] {
        guard !stopping else {
            return sources.map { _ in .unrecorded(Self.stoppingError, retry: nil) }
        }
        requests += 1
        let outcomes = await withTaskGroup(of: (Int, PollOutcome).self) { group in
            for (i, source) in sources.enumerated() {
                group.addTask { (i, await self.pollOnRequest(source)) }
            }
            var out: [(Int, PollOutcome)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
        requests -= 1
        if requests == 0 {
            let waiting = requestsDone
            requestsDone = []
            waiting.forEach { $0.resume() }
        }
        return outcomes
    }

    private func pollOnRequest(_ source: SourceConfig) async -> PollOutcome {
        while inFlight.contains(source.name) {
            await withCheckedContinuation { waitingForSource[source.name, default: []].append($0) }
        }
        guard !stopping else {
            finished(source.name)  // (pass the turn on to the next waiting request)
            return .unrecorded(Self.stoppingError, retry: nil)
        }
        inFlight.insert(source.name)
        let outcome = await limitedPoll(provided(source), options: requestOptions)
        if !outcome.record.events.isEmpty { onEvents() }
        finished(source.name)
        if deferred.remove(source.name) != nil, !stopping {
            queue.push(env.now(), source.name)
            wakeup.signal()
        }
        return outcome
    }

    /// Stop starting polls; ``run()`` returns once in-flight polls are done.
    package func stop() {
        stopping = true
        wakeup.signal()
    }

    /// One line per ``reportInterval``: polls started and their lateness against the jittered
    /// due time (window, then since start). Cheap: one sort of the window's samples.
    private func report(seconds: Double) {
        func ms(_ s: Double) -> String { decimalText(s * 1000, digits: 1) + "ms" }
        let (lateness, w) = latenessStats.withLock { s in
            defer { s.recent = LatenessStats() }
            return s
        }
        logger.info(
            "scheduler: polls=\(w.count) in \(Int(seconds.rounded()))s, lateness p50=\(ms(w.percentile(0.5))) p99=\(ms(w.percentile(0.99))) max=\(ms(w.maximum)); since start: polls=\(lateness.count) p50=\(ms(lateness.percentile(0.5))) p99=\(ms(lateness.percentile(0.99))) max=\(ms(lateness.maximum))"
        )
    }

    /// Queues every enabled source: a stored due time is kept only if it fits the settings
    /// now loaded (``StoredSchedule``); new sources start spread; removed ones are not queued.
    private func seed() async {
        await schedule(leased.map(Array.init))
    }

    /// Queues `names` (nil: every source) from their stored schedules. `takeover`: sources
    /// another instance polled until now; overdue ones (their owner died) are spread over a
    /// short window only, not the start-up window (DESIGN §11: polled again within two intervals).
    private func schedule(_ names: [String]?, takeover: Bool = false) async {
        if names?.isEmpty == true { return }
        // The sources to queue, by index in the configuration's order: a filtered copy of the
        // configurations was 35 MB at 100,000 sources, at each start and takeover (issue 33).
        var active: [Int] = []
        if let names {
            active.reserveCapacity(names.count)
            for name in names {
                if let i = index(name), config.sources[i].settings.enabled { active.append(i) }
            }
            active.sort()
        } else {
            active = config.sources.indices.filter { config.sources[$0].settings.enabled }
        }
        let activeNames = active.map { config.sources[$0].name }
        var schedules: [StoredSchedule?] = []
        var authFailed: [String: String] = [:]
        do {
            (schedules, authFailed) = try await runner.store.database.read { db in try StoredSchedule.all(db, names: activeNames) }
        } catch {
            runner.stateFailed(
                "could not read the schedule from the state database \(runner.store.path): \(error); starting every source afresh", logger: logger)
        }
        let now = env.now()
        for (k, i) in active.enumerated() {
            let s = config.sources[i]
            if let hash = authFailed[s.name], hash == s.configHash {
                logger.warning("source \(s.name) is waiting for a config change (credentials were rejected); not polling it")
                continue
            }
            let window =
                takeover
                ? min(s.settings.interval / 8, Double(active.count) * 0.005)
                : Backoff.spreadWindow(count: active.count, interval: s.settings.interval)
            let schedule = (k < schedules.count ? schedules[k] : nil) ?? StoredSchedule(nextDue: nil)
            queue.push(schedule.firstDue(settings: s.settings, now: now, spread: window, unit: env.unit()), s.name)
        }
    }

    /// The sources whose leases this instance holds changed (``LeaseKeeper``): new ones are
    /// queued from the schedule the state holds (the previous owner's), lost ones are no
    /// longer polled (a queued entry is dropped when it comes up).
    package func leasesChanged(_ sources: Set<String>) async {
        guard let before = leased, before != sources, !stopping else { return }
        leased = sources
        for name in before.subtracting(sources) { providers[name] = nil }
        let gained = sources.subtracting(before).filter { !inFlight.contains($0) }
        guard !gained.isEmpty else { return }
        await schedule(Array(gained), takeover: true)
        wakeup.signal()
    }

    /// Whether a provider is built for `name` now (tests: held sources kept as recipes have one).
    func hasProvider(_ name: String) -> Bool { index(name).map { config.sources[$0].recipe == nil } == true || providers[name] != nil }

    /// `source` with its provider: as loaded; for one kept as a recipe, the one built for it
    /// since this instance took its lease, else one built now (and kept while the lease is).
    private func provided(_ source: SourceConfig) -> SourceConfig {
        guard source.recipe != nil else { return source }
        var s = source
        if let p = providers[source.name] {
            s.instance = p
        } else {
            s.instance = Self.build(source, config.builder, logger: logger)
            if leased?.contains(source.name) == true { providers[source.name] = s.instance }
        }
        s.recipe = nil
        return s
    }

    /// The provider of a source kept as a recipe, built as its load built it; if that fails (it
    /// should not: the load built it once), a provider whose polls fail with the reason.
    private static func build(_ source: SourceConfig, _ builder: (any SourceBuilder)?, logger: Logger) -> any Provider {
        do {
            guard let builder else { throw PollError(.transient, "no builder for sources kept as recipes") }
            let built = try builder.build(source)
            if built.configHash != source.configHash {
                logger.warning("source \(source.name): its provider was built again from its declaration as loaded, but the hash differs (a secret changed?)")
            }
            return built.instance
        } catch {
            logger.error("source \(source.name): cannot build its provider again: \(error)")
            return UnbuiltProvider(why: "cannot build this source's provider again: \(error)")
        }
    }

    /// After a suspend or a clock jump: overdue sources are polled soon, spread; dates
    /// left far in the future by a backwards jump are pulled in.
    private func catchUp(now: Date, drift: Double) {
        logger.notice("clock jumped \(drift > 0 ? "forward" : "back") by \(DurationParser.format(abs(drift))) (suspend?); rescheduling overdue sources")
        spreadOverdue(now: now, pullingIn: true)
    }

    /// Overdue sources are moved to soon, spread over the start-up window (not one burst);
    /// `pullingIn`: dates more than two intervals away (a backwards clock jump) come within
    /// one. Returns how many were overdue.
    @discardableResult
    private func spreadOverdue(now: Date, pullingIn: Bool) -> Int {
        let count = queue.count
        var overdue = 0
        queue.remap { due, name in
            let interval = index(name).map { config.sources[$0].settings.interval } ?? 300
            let window = Backoff.spreadWindow(count: count, interval: interval)
            if due <= now {
                overdue += 1
                return now.addingTimeInterval(window * env.unit())
            }
            if pullingIn, due.timeIntervalSince(now) > interval * 2 { return now.addingTimeInterval(interval * env.unit()) }
            return due
        }
        return overdue
    }

    /// The network or sleep state changed (the daemon's system-bus watcher): a pause stops
    /// scheduled polls from starting (the queue is kept; polls on request still run); when
    /// polls resume, sources that came due meanwhile are polled at once, spread. The same
    /// conditions again change nothing, so a reload can hand its state to a new scheduler.
    package func update(_ new: HostConditions) {
        if new.network != host.network { change(.network(new.network), now: env.now()) }
        if new.power != host.power { change(.power(new.power), now: env.now()) }
    }

    package func networkChanged(_ network: Connectivity) {
        update(HostConditions(network: network, power: host.power))
    }

    package func powerChanged(_ power: PowerState) {
        update(HostConditions(network: host.network, power: power))
    }

    /// One transition, one log line. `why` follows the change's name.
    private func change(_ change: HostChange, now: Date, why: String = "") {
        let was = host.pause
        host.apply(change)
        sharedHost.current = host
        let what = change.name + why
        switch (was, host.pause) {
        case (nil, nil): logger.notice("\(what)")
        case (nil, _?): logger.notice("\(what): polls paused")
        case (_?, _?): logger.notice("\(what): polls stay paused\(host.pause(besides: change).map { " (\($0.rawValue))" } ?? "")")
        case (_?, nil):
            let n = spreadOverdue(now: now, pullingIn: false)
            logger.notice("\(what): polling \(n) overdue source\(n == 1 ? "" : "s")")
        }
        // The wait in progress may have spanned a sleep: no clock-jump catch-up on top of this one.
        lastWake = now
        expectedSleep = 0
        wakeup.signal()
    }

    /// A scheduled poll, in the loop's task group. Off the actor until it ends: the poll itself
    /// needs none of the scheduler's state, and each hop onto the actor and off again cost a
    /// job on the cooperative pool (a thread woken) per poll; the end is one call on the actor.
    private nonisolated func execute(_ source: SourceConfig, due: Date) async {
        let outcome = await limitedPoll(source, options: options, holding: true) {
            let now = self.env.now()
            let late = now.timeIntervalSince(due)
            self.latenessStats.withLock { s in
                s.all.record(late)
                s.recent.record(late)
            }
            self.window?.record(late, at: now)
            TidingsMetrics.late(seconds: late)
        }
        if !outcome.record.events.isEmpty { onEvents() }
        guard let next = outcome.next else { return await finished(source.name) }
        if next.store {
            do {
                try await runner.recorder.setNextDue(source.name, provider: source.provider, at: next.due)
            } catch {
                runner.stateFailed("could not store the next due time of \(source.name) in \(runner.store.path): \(error)", logger: logger)
            }
        }
        await completed(source.name, next: next.due)
    }

    /// Polls within `max_concurrent` and `max_per_host`; `started` runs once both allow it.
    /// `holding`: the loop took the `max_concurrent` slot already.
    private nonisolated func limitedPoll(
        _ source: SourceConfig, options: RecordOptions, holding: Bool = false, started: () -> Void = {}
    ) async -> PollOutcome {
        await limits.withSlot(for: source, holding: holding) {
            started()
            let began = ContinuousClock.now
            let outcome = await runner.poll(source, options: options, logger: logger)
            TidingsMetrics.polled(source.name, outcome, accounting: options.accounting, seconds: (ContinuousClock.now - began) / .seconds(1), now: env.now())
            return outcome
        }
    }

    /// The poll of `name` in flight ended: the next poll of it, waiting on request, may start.
    /// Its `max_concurrent` slot is free again: a poll waiting for one may start.
    private func finished(_ name: String) {
        inFlight.remove(name)
        if waitingForSlot { wakeup.signal() }
        guard var waiting = waitingForSource[name], !waiting.isEmpty else { return }
        let next = waiting.removeFirst()
        waitingForSource[name] = waiting.isEmpty ? nil : waiting
        next.resume()
    }

    private func completed(_ name: String, next: Date) {
        finished(name)
        guard !stopping else { return }
        let wasEarliest = queue.peek.map { next < $0.due } ?? true
        queue.push(next, name)
        if wasEarliest { wakeup.signal() }
    }

}

/// Running lateness figures: count, max, and a bounded reservoir for percentiles.
package struct LatenessStats: Sendable {
    package private(set) var count = 0
    package private(set) var maximum: Double = 0
    private var samples: [Double] = []

    mutating func record(_ seconds: Double) {
        count += 1
        maximum = max(maximum, seconds)
        if samples.count < 100_000 { samples.append(seconds) } else { samples[count % samples.count] = seconds }
    }

    package func percentile(_ p: Double) -> Double {
        guard !samples.isEmpty else { return 0 }
        let sorted = samples.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
    }
}

/// The daemon's poll lateness over the last minute (DESIGN §8, `tidings status`'s "behind by"):
/// the scheduler records each poll's start, ``PulseKeeper`` reads the 99th percentile.
package final class LatenessWindow: Sendable {
    private struct Sample {
        var at: Date
        var late: Double
    }
    /// Oldest first; pruned once the oldest is two spans old; at most ``limit`` (then the oldest go first).
    private let samples = Mutex<[Sample]>([])
    package static let span: TimeInterval = 60
    private static let limit = 100_000

    package init() {}

    func record(_ late: Double, at now: Date) {
        samples.withLock { s in
            if s.count >= Self.limit || s.first.map({ now.timeIntervalSince($0.at) > 2 * Self.span }) == true {
                s.removeAll { now.timeIntervalSince($0.at) > Self.span }
                if s.count >= Self.limit { s.removeFirst(s.count - Self.limit + 1) }
            }
            s.append(Sample(at: now, late: late))
        }
    }

    /// The 99th percentile of the lateness of polls started within ``span`` before `now`;
    /// nil when none started.
    package func p99(now: Date) -> Double? {
        let recent = samples.withLock { s in s.filter { now.timeIntervalSince($0.at) <= Self.span }.map(\.late) }
        guard !recent.isEmpty else { return nil }
        let sorted = recent.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * 0.99))]
    }
}
