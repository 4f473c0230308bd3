import FoundationEssentials
import Logging
import Synchronization
import TidingsPluginAPI

/// Delivers outbox rows to sinks: per-sink order, retries with backoff and jitter, dead
/// letters after `maxAge` (and at once for rows whose event cannot be read), and a sink
/// disabled on HTTP 410 until reload.
///
/// A row is removed only after its sink succeeded, so a crash at any point loses nothing;
/// at worst an event is delivered twice, with the same event id.
package final class OutboxWorker: Sendable {
    /// Where one sink's loop stands between attempts.
    enum SinkState: Equatable, Sendable {
        /// Delivering: the last attempt, if any, succeeded or ended in a dead letter.
        case ready
        /// The last attempt failed and is due again later. Its first failure was logged as a
        /// warning; the next success is logged as the recovery.
        case failing
        /// HTTP 410: nothing more goes to this sink until the configuration is reloaded.
        case disabled
        /// The sink accepted these deliveries but the outbox could not record it (disk full,
        /// read-only): they are never sent again, and recording them comes before anything else.
        case unrecorded([Int64])
        /// The outcome of an attempt could not be written (the row is as it was): wait, then
        /// go on as `failing` or `ready`.
        case stalled(failing: Bool)
    }

    /// What became of a delivery that did not succeed (what `tidings check --deliver` reports).
    package struct Failure: Sendable, Equatable, CustomStringConvertible {
        package enum Outcome: Sendable, Equatable {
            /// It stays queued; a later attempt retries it.
            case queued
            /// It will never be delivered (refused, too old, or its event cannot be read):
            /// a dead letter, until `tidings outbox retry`.
            case dead
            /// The sink's endpoint is gone (HTTP 410): the delivery stays queued and nothing
            /// more goes to that sink until the configuration is reloaded.
            case sinkDisabled
            /// The sink accepted it, but the state could not record that: this process does not
            /// send it again, a later one may (with the same event id).
            case deliveredUnrecorded
        }
        package var outcome: Outcome
        package var message: String
        package var description: String { message }
    }

    private let outbox: OutboxStore
    private let sinks: [String: any Sink]
    private let policy: RetryPolicy
    private let env: any Environment
    private let logger: Logger
    /// Each sink loop's sleep, on the environment's clock.
    private let wakeups: [String: Wakeup]
    private let states: Mutex<[String: SinkState]>
    private let stopping = Atomic<Bool>(false)
    /// Failed writes to the state database (disk full, read-only): one error line per outage.
    private let stateLog = OnceLog()
    /// How long a sink loop waits before trying again to write the state database.
    package static let stateRetry: TimeInterval = 5
    /// Upper bound for one sink call, beyond the sink's own timeouts.
    package let callTimeout: TimeInterval
    /// Where daemons share the state: whether this instance delivers to a sink now (it holds
    /// the sink's lease, so per-sink order holds across instances). Nil: every sink.
    private let gate: (@Sendable (String) -> Bool)?

    package convenience init(
        store: StateStore, sinks: [String: any Sink], policy: RetryPolicy, env: any Environment = SystemEnvironment(), logger: Logger,
        callTimeout: TimeInterval = 120
    ) {
        self.init(store: store, sinks: sinks, policy: policy, env: env, logger: logger, callTimeout: callTimeout, leases: nil)
    }

    /// `leases`: where daemons share the state, this instance's (it delivers only to the sinks
    /// whose leases it holds).
    package init(
        store: StateStore, sinks: [String: any Sink], policy: RetryPolicy, env: any Environment = SystemEnvironment(), logger: Logger,
        callTimeout: TimeInterval = 120, leases: LeaseKeeper?, digestLimit: Int = OutboxStore.defaultDigestLimit
    ) {
        self.callTimeout = callTimeout
        if let leases {
            self.gate = { @Sendable sink in leases.holds(sink: sink) }
        } else {
            self.gate = nil
        }
        var outbox = OutboxStore(store: store)
        outbox.digestLimit = digestLimit
        self.outbox = outbox
        self.sinks = sinks
        self.policy = policy
        self.env = env
        self.logger = logger
        self.wakeups = Dictionary(uniqueKeysWithValues: sinks.keys.map { ($0, Wakeup(env: env)) })
        self.states = Mutex(Dictionary(uniqueKeysWithValues: sinks.keys.map { ($0, SinkState.ready) }))
    }

    /// New rows were committed: wake the sink loops.
    package func nudge() { wakeups.values.forEach { $0.signal() } }

    /// Deliveries waiting for a retry are due now (the network came back, the host woke up).
    package func retryNow() async {
        do { try await outbox.retryPendingNow(env.now(), sinks: Array(sinks.keys)) } catch { logger.error("outbox: \(error)") }
        nudge()
    }

    /// Stop after the deliveries in flight.
    package func stop() {
        stopping.store(true, ordering: .relaxed)
        nudge()
    }

    private func state(_ sink: String) -> SinkState { states.withLock { $0[sink] ?? .ready } }

    /// Sets the sink's state; returns the one before.
    @discardableResult
    private func setState(_ sink: String, _ new: SinkState) -> SinkState {
        states.withLock { $0.updateValue(new, forKey: sink) ?? .ready }
    }

    /// One loop per sink until ``stop()`` or cancellation.
    package func run() async {
        do { try await outbox.retryPendingNow(env.now(), sinks: Array(sinks.keys)) } catch { logger.error("outbox: \(error)") }
        if let orphans = try? await outbox.sinksWithPending().filter({ sinks[$0] == nil }), !orphans.isEmpty {
            logger.warning(
                "outbox has pending deliveries for sinks that are no longer configured: \(orphans.sorted().joined(separator: ", ")) (see `tidings outbox`)")
        }
        await withTaskGroup(of: Void.self) { group in
            for (name, sink) in sinks {
                group.addTask { await self.loop(name, sink) }
            }
        }
    }

    private func loop(_ name: String, _ sink: any Sink) async {
        let wake = wakeups[name]!
        while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
            switch state(name) {
            case .disabled:
                await wake.wait(seconds: 3600)
                continue
            case .unrecorded(let ids):
                await wake.wait(seconds: Self.stateRetry)
                await recordDelivered(name, ids)
                continue
            case .stalled(let failing):
                await wake.wait(seconds: Self.stateRetry)
                setState(name, failing ? .failing : .ready)
                continue
            case .ready, .failing:
                break
            }
            if let gate, !gate(name) {
                // Another instance delivers to this sink (or none may yet): wait for the lease.
                await wake.wait(seconds: 1)
                continue
            }
            let head: OutboxHead
            do {
                head = try await outbox.head(sink: name, batch: sink.acceptsBatches, digests: sink.rendersDigests, now: env.now())
                stateLog.succeeded("read \(name)", "outbox: reading deliveries for sink \(name) works again", logger: logger)
            } catch {
                stateLog.failed("read \(name)", "outbox: cannot read deliveries for sink \(name) from \(outbox.store.path): \(error)", logger: logger)
                await wake.wait(seconds: Self.stateRetry)
                continue
            }
            switch head {
            case .empty:
                // Nothing to send now: sleep until new rows (a nudge), the next held row's
                // release, or a minute.
                let release = (try? await outbox.nextRelease(sink: name)).flatMap { $0 }.map { $0.timeIntervalSince(env.now()) }
                await wake.wait(seconds: max(0.01, min(60, release ?? 60)))
            case .unreadable(let row):
                await deadLetter(name, row)
            case .due(let rows):
                let wait = rows[0].nextAttempt.timeIntervalSince(env.now())
                if wait > 0 {
                    await wake.wait(seconds: wait)
                } else {
                    await attempt(name, sink, rows)
                }
            }
        }
    }

    /// Delivers everything currently due, once per row, without waiting for retries
    /// (`tidings check --deliver`). Returns, per sink, the last delivery that did not succeed.
    package func drainOnce() async -> [String: Failure] {
        var failures: [String: Failure] = [:]
        for (name, sink) in sinks.sorted(by: { $0.key < $1.key }) {
            drain: while true {
                let head: OutboxHead
                do {
                    head = try await outbox.head(sink: name, batch: sink.acceptsBatches, digests: sink.rendersDigests, now: env.now())
                } catch {
                    // A state error must reach the caller's exit status, not pass for an empty queue.
                    failures[name] = Failure(outcome: .queued, message: "cannot read its deliveries from \(outbox.store.path): \(error)")
                    break
                }
                let failure: Failure?
                switch head {
                case .empty:
                    break drain
                case .unreadable(let row):
                    failure = await deadLetter(name, row)
                case .due(let rows):
                    guard rows[0].nextAttempt <= env.now().addingTimeInterval(0.5) else { break drain }
                    failure = await attempt(name, sink, rows)
                }
                guard let failure else { continue }
                failures[name] = failure
                // A dead letter does not hold up the rest of the queue; anything else does.
                if failure.outcome != .dead { break }
            }
        }
        return failures
    }

    /// One delivery attempt. Returns what became of it when it did not succeed.
    @discardableResult
    private func attempt(_ name: String, _ sink: any Sink, _ due: [Delivery]) async -> Failure? {
        var log = logger
        log[metadataKey: "sink"] = "\(name)"
        let rows = await unsilenced(due, log: log)
        guard !rows.isEmpty else { return nil }
        let digest = Self.digest(name, sink, rows)
        do {
            try await withTimeout(
                callTimeout, onTimeout: { DeliveryError(.retryable, "sink did not answer within \(DurationParser.format(self.callTimeout))") }
            ) {
                if let digest { try await sink.deliverDigest(digest) } else { try await sink.deliver(rows.map(\.event)) }
            }
        } catch {
            let failure = await failed(name, rows, (error as? DeliveryError) ?? DeliveryError(.retryable, "\(error)"), log: log)
            TidingsMetrics.delivered(sink: name, failure.outcome.metric, count: rows.count)
            return failure
        }
        TidingsMetrics.delivered(sink: name, .delivered, count: rows.count)
        if let digest {
            log.info("delivered a digest of \(rows.count) events (\(digest.reason == .quietHours ? "held for quiet hours" : "grouped")), id \(digest.id)")
        }
        for e in rows.map(\.event) { log.info("delivered \(e.event.rawValue) \(e.kind) \(e.id) (\(e.source))") }
        if setState(name, .ready) == .failing { log.notice("sink \(name) recovered") }
        return await recordDelivered(name, rows.map(\.id))
    }

    /// Of rows a route held (quiet hours, group_wait), those a silence added meanwhile does not
    /// keep back (``OutboxStore/silenceDue(_:now:)``). Other rows were checked by the poll that
    /// queued them; a retry goes out as it was decided. When the state cannot say, they are
    /// delivered: a duplicate notification is better than a lost one.
    private func unsilenced(_ rows: [Delivery], log: Logger) async -> [Delivery] {
        guard rows.contains(where: { $0.hold != nil }) else { return rows }
        do {
            let kept = try await outbox.silenceDue(rows, now: env.now())
            if kept.count < rows.count {
                log.info(
                    "\(rows.count - kept.count) held deliver\(rows.count - kept.count == 1 ? "y" : "ies") silenced before going out (see `tidings history`)")
            }
            return kept
        } catch {
            log.warning("outbox: cannot check silences for held deliveries in \(outbox.store.path): \(error); delivering them")
            return rows
        }
    }

    /// Several rows held together, for a sink that shows them as one message: their digest.
    ///
    /// Its id is derived from the batch and the first row of this part, so a retried digest is
    /// recognisably the same (a Matrix transaction id, an email Message-ID), while the parts of a
    /// batch too large for one message (``OutboxStore/digestLimit`` rows) each have their own: a
    /// second part with the first part's id was taken for a retry and dropped by the receiver.
    /// A part's first row is stable: rows go only when their whole part was delivered.
    static func digest(_ name: String, _ sink: any Sink, _ rows: [Delivery]) -> Digest? {
        guard rows.count > 1, let reason = rows[0].hold, sink.rendersDigests else { return nil }
        let first = rows[0]
        return Digest(id: Fingerprint.of(["digest", name, first.batch, String(first.id)]), reason: reason, events: rows.map(\.event))
    }

    /// The sink has these: the rows go. When the outbox cannot record that (disk full), the
    /// sink waits in ``SinkState/unrecorded(_:)`` so they are not sent again.
    @discardableResult
    private func recordDelivered(_ name: String, _ ids: [Int64]) async -> Failure? {
        do {
            try await outbox.markDelivered(ids)
        } catch {
            setState(name, .unrecorded(ids))
            let message = "outbox: cannot record deliveries to sink \(name) in \(outbox.store.path): \(error)"
            stateLog.failed(name, message, logger: logger)
            return Failure(outcome: .deliveredUnrecorded, message: message)
        }
        if case .unrecorded = setState(name, .ready) {
            stateLog.succeeded(name, "outbox: recorded \(ids.count) earlier deliveries to sink \(name); \(outbox.store.path) is writable again", logger: logger)
        } else {
            stateLog.succeeded(name, "outbox: \(outbox.store.path) is writable again", logger: logger)
        }
        return nil
    }

    /// A row whose event cannot be read: a dead letter with the reason, logged once (it is no
    /// longer pending), and the sink goes on with the next.
    @discardableResult
    private func deadLetter(_ name: String, _ row: UnreadableDelivery) async -> Failure {
        var log = logger
        log[metadataKey: "sink"] = "\(name)"
        let failure = await recordOutcome(name, log: log, failing: state(name) == .failing, what: "a delivery whose event cannot be read") {
            try await outbox.markDead([row.id], attempts: nil, error: row.reason)
            log.error("sink \(name): delivery #\(row.id) (event \(row.eventID ?? "missing")) is a dead letter: \(row.reason) (see `tidings outbox`)")
            return Failure(outcome: .dead, message: "delivery #\(row.id): \(row.reason)")
        }
        TidingsMetrics.delivered(sink: name, failure.outcome.metric)
        return failure
    }

    /// Records a failed attempt: dead letter, disabled sink, or a retry with backoff.
    private func failed(_ name: String, _ rows: [Delivery], _ de: DeliveryError, log: Logger) async -> Failure {
        let ids = rows.map(\.id)
        let attempts = (rows.map(\.attempts).max() ?? 0) + 1
        let now = env.now()
        return await recordOutcome(name, log: log, failing: de.category == .retryable || state(name) == .failing, what: "a failed delivery") {
            switch de.category {
            case .permanent:
                try await outbox.markDead(ids, attempts: attempts, error: de.message)
                log.error("sink \(name) refused event \(rows[0].event.id): \(de.message); not retrying (see `tidings outbox`)")
                return Failure(outcome: .dead, message: de.message)
            case .gone:
                try await outbox.markRetry(ids, attempts: attempts, next: now, error: de.message)
                setState(name, .disabled)
                log.critical("SINK \(name) DISABLED until reload: \(de.message). Its deliveries stay queued; fix the sink and send SIGHUP.")
                return Failure(outcome: .sinkDisabled, message: de.message)
            case .retryable:
                let age = now.timeIntervalSince(rows.map(\.createdAt).min() ?? now)
                if age >= policy.maxAge {
                    let msg = "gave up after \(attempts) attempts over \(DurationParser.format(age)): \(de.message)"
                    try await outbox.markDead(ids, attempts: attempts, error: msg)
                    log.error("sink \(name): \(msg)")
                    return Failure(outcome: .dead, message: msg)
                }
                let delay = policy.delay(afterAttempts: attempts, unit: env.unit(), retryAfter: de.retryAfter)
                try await outbox.markRetry(ids, attempts: attempts, next: now.addingTimeInterval(delay), error: de.message)
                let first = setState(name, .failing) != .failing
                let text = "delivery to sink \(name) failed (attempt \(attempts)): \(de.message); retrying in \(DurationParser.format(delay))"
                if first { log.warning("\(text)") } else { log.debug("\(text)") }
                return Failure(outcome: .queued, message: de.message)
            }
        }
    }

    /// Runs `write`, which records an outcome in the outbox. If the state cannot be written,
    /// nothing changed: the sink stalls for a moment and the row stays queued as it was.
    private func recordOutcome(_ name: String, log: Logger, failing: Bool, what: String, _ write: () async throws -> Failure) async -> Failure {
        do {
            let outcome = try await write()
            stateLog.succeeded(name, "outbox: \(outbox.store.path) is writable again", logger: log)
            return outcome
        } catch {
            setState(name, .stalled(failing: failing))
            let message = "outbox: cannot record the result of \(what) to sink \(name) in \(outbox.store.path): \(error)"
            stateLog.failed(name, message, logger: log)
            return Failure(outcome: .queued, message: message)
        }
    }
}

extension OutboxWorker.Failure.Outcome {
    /// The `outcome` label of `tidings_deliveries_total`.
    var metric: TidingsMetrics.DeliveryOutcome {
        switch self {
        case .queued: return .retry
        case .dead: return .dead
        case .sinkDisabled: return .disabled
        case .deliveredUnrecorded: return .delivered
        }
    }
}
