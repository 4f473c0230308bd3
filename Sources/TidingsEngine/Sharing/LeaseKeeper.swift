import FoundationEssentials
import Logging
import Synchronization
import TidingsPluginAPI

/// Runs this daemon's lease rounds where several daemons share one state (DESIGN §11), and
/// answers whether it may poll a source or deliver to a sink right now.
///
/// Timing, from the configuration:
/// - a round every `period` = ¼ of the shortest source interval, within 0.25 s…10 s;
/// - a source's lease lasts `max(3·period, min(interval, timeout + 2·period))`: it survives
///   two missed rounds, is never longer than an interval, and a source with a short timeout
///   fails over sooner. A killed instance renewed at most a round after its last poll; its
///   leases expire a lease later, and survivors take them within two rounds (one with room
///   in its share, or any after the grace round): polled again within lease + 3 rounds
///   ≤ 1.75 intervals of the last poll (DESIGN §11: within two);
/// - a sink's lease lasts `3·period`;
/// - an instance counts as live for the fair share while its heartbeat is younger than
///   `2·period` (shorter than any lease: a dead instance stops counting before its leases
///   expire, so the survivors' shares already include its sources when they take them).
///
/// If a round fails (the database is unreachable), this instance stops polling and
/// delivering once its leases could have expired (it cannot know whether others took them);
/// the poll's transaction checks the lease too (``LeaseBook/check(_:name:owner:now:)``).
package final class LeaseKeeper: Sendable {
    package let instance: Instance
    package let period: TimeInterval
    private let database: any StateDatabase
    private let wants: LeaseWants
    private let shortestLease: TimeInterval
    private let logger: Logger
    private let env: any Environment
    private let state = Mutex<State>(State())
    private let stopping = Atomic<Bool>(false)
    private let releasing = Atomic<Bool>(true)
    /// The wait between rounds, on the environment's clock.
    private let wakeup: Wakeup
    private let failures = OnceLog()

    private struct State {
        var held = LeaseBook.Held()
        /// Until when the held leases are surely still ours (the last good round + the shortest lease).
        var validUntil = Date.distantPast
        var known = KnownLeases()
        var live = 0
    }

    /// Called after each round that changed what this instance holds.
    package typealias Listener = @Sendable (_ sources: Set<String>, _ sinks: Set<String>) async -> Void

    package init(
        database: any StateDatabase, instance: Instance = .current(), sources: [SourceConfig], sinks: [String],
        env: any Environment = SystemEnvironment(), logger: Logger
    ) {
        let active = sources.lazy.filter { $0.settings.enabled }
        let shortest = active.map(\.settings.interval).min() ?? 60
        let period = min(10, max(0.25, shortest / 4))
        let wants = LeaseWants(
            sources: LeaseLengths(
                active.map { s in
                    (LeaseBook.sourceLease(s.name), Self.leaseLength(interval: s.settings.interval, timeout: s.settings.timeout, period: period))
                }),
            sinks: LeaseLengths(sinks.map { (LeaseBook.sinkLease($0), 3 * period) }))
        self.database = database
        self.instance = instance
        self.period = period
        self.wants = wants
        self.shortestLease = (wants.sources.values + wants.sinks.values).min() ?? 3 * period
        self.env = env
        self.wakeup = Wakeup(env: env)
        self.logger = logger
    }

    package static func leaseLength(interval: TimeInterval, timeout: TimeInterval, period: TimeInterval) -> TimeInterval {
        max(3 * period, min(interval, timeout + 2 * period))
    }

    package func holds(source: String) -> Bool { holds(LeaseBook.sourceLease(source), in: \.sources) }
    package func holds(sink: String) -> Bool { holds(LeaseBook.sinkLease(sink), in: \.sinks) }

    private func holds(_ name: String, in set: KeyPath<LeaseBook.Held, Set<String>>) -> Bool {
        let now = env.now()
        return state.withLock { $0.validUntil > now && $0.held[keyPath: set].contains(name) }
    }

    /// The sources this instance polls now (names, not lease names).
    package var sources: Set<String> { state.withLock { Set($0.held.sources.map { String($0.dropFirst(7)) }) } }
    package var sinks: Set<String> { state.withLock { Set($0.held.sinks.map { String($0.dropFirst(5)) }) } }

    /// One round; tells `listener` when the held set changed. Returns false if it failed.
    @discardableResult
    package func round(_ listener: Listener) async -> Bool {
        let now = env.now()
        let (instance, wants, window, grace) = (self.instance, self.wants, 2 * period, period)
        let known = state.withLock { $0.known }
        do {
            let (held, newKnown) = try await database.write { db in
                var k = known
                let held = try LeaseBook.round(db, instance: instance, wants: wants, liveWindow: window, grace: grace, now: now, known: &k)
                return (held, k)
            }
            let before = state.withLock { s -> LeaseBook.Held in
                let before = s.held
                s.held = held
                s.known = newKnown
                s.validUntil = now.addingTimeInterval(shortestLease)
                return before
            }
            failures.succeeded("round", "leases: renewed again in \(database.location)", logger: logger)
            if before != held {
                if before.sources.count != held.sources.count || before.live != held.live || before.sinks != held.sinks {
                    logger.info(
                        "leases: polling \(held.sources.count) of \(wants.sources.count) sources, delivering to \(held.sinks.count) of \(wants.sinks.count) sinks; \(held.live) instance\(held.live == 1 ? "" : "s") live"
                    )
                }
                await listener(sources, sinks)
            }
            return true
        } catch {
            failures.failed(
                "round", "leases: cannot renew in \(database.location): \(error); polls and deliveries stop when the leases may have expired", logger: logger)
            return false
        }
    }

    /// Rounds every `period` until ``stop(release:)``; then, on a stop, releases every lease
    /// (others take over at once).
    package func run(_ listener: @escaping Listener) async {
        while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
            await round(listener)
            await wakeup.wait(seconds: period)
        }
        if releasing.load(ordering: .relaxed) { await releaseAll() }
    }

    /// `release`: a clean stop (the leases go now); false for a reload, whose next
    /// generation (the same instance) renews them.
    package func stop(release: Bool = true) {
        releasing.store(release, ordering: .relaxed)
        stopping.store(true, ordering: .relaxed)
        wakeup.signal()
    }

    private func releaseAll() async {
        let instance = self.instance
        let now = env.now()
        state.withLock {
            $0.held = LeaseBook.Held()
            $0.validUntil = .distantPast
        }
        do {
            try await database.write { db in try LeaseBook.releaseAll(db, instance: instance, now: now) }
            logger.info("leases: released (a clean stop); other instances take over now")
        } catch {
            logger.error("leases: could not release them in \(database.location): \(error); other instances take over when they expire")
        }
    }
}
