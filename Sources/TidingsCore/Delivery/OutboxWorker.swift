import Foundation
import Logging
import Synchronization

/// Delivers outbox rows to sinks: per-sink order, retries with backoff and jitter, dead
/// letters after `maxAge`, and a sink disabled on HTTP 410 until reload.
///
/// A row is removed only after its sink succeeded, so a crash at any point loses nothing;
/// at worst an event is delivered twice, with the same event id.
public final class OutboxWorker: Sendable {
    private let outbox: OutboxStore
    private let sinks: [String: any Sink]
    private let policy: RetryPolicy
    private let env: any Environment
    private let logger: Logger
    private let wakeups: [String: Wakeup]
    private let state = Mutex<(disabled: Set<String>, failing: Set<String>, stopping: Bool, unrecorded: [String: [Int64]])>(([], [], false, [:]))
    /// Failed writes to the state database (disk full, read-only): one error line per outage.
    private let stateLog = OnceLog()
    /// How long a sink loop waits before trying again to write the state database.
    public static let stateRetry: TimeInterval = 5
    /// Upper bound for one sink call, beyond the sink's own timeouts.
    public let callTimeout: TimeInterval

    public init(store: StateStore, sinks: [String: any Sink], policy: RetryPolicy, env: any Environment = SystemEnvironment(), logger: Logger, callTimeout: TimeInterval = 120) {
        self.callTimeout = callTimeout
        self.outbox = OutboxStore(store: store)
        self.sinks = sinks
        self.policy = policy
        self.env = env
        self.logger = logger
        self.wakeups = Dictionary(uniqueKeysWithValues: sinks.keys.map { ($0, Wakeup()) })
    }

    /// New rows were committed: wake the sink loops.
    public func nudge() { wakeups.values.forEach { $0.signal() } }

    /// Stop after the deliveries in flight.
    public func stop() {
        state.withLock { $0.stopping = true }
        nudge()
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    /// One loop per sink until ``stop()`` or cancellation.
    public func run() async {
        do { try outbox.retryPendingNow(env.now()) } catch { logger.error("outbox: \(error)") }
        if let orphans = try? outbox.sinksWithPending().filter({ sinks[$0] == nil }), !orphans.isEmpty {
            logger.warning("outbox has pending deliveries for sinks that are no longer configured: \(orphans.sorted().joined(separator: ", ")) (see `tidings outbox`)")
        }
        await withTaskGroup(of: Void.self) { group in
            for (name, sink) in sinks {
                group.addTask { await self.loop(name, sink) }
            }
        }
    }

    private func loop(_ name: String, _ sink: any Sink) async {
        let wake = wakeups[name]!
        while !stopping && !Task.isCancelled {
            if state.withLock({ $0.disabled.contains(name) }) {
                await wake.wait(seconds: 3600)
                continue
            }
            guard recordUnrecorded(name) else {
                await wake.wait(seconds: Self.stateRetry)
                continue
            }
            let rows: [Delivery]
            do {
                rows = try outbox.head(sink: name, batch: sink.acceptsBatches)
            } catch {
                logger.error("outbox: cannot read deliveries for sink \(name): \(error)")
                await wake.wait(seconds: 5)
                continue
            }
            guard let head = rows.first else {
                await wake.wait(seconds: 60)
                continue
            }
            let wait = head.nextAttempt.timeIntervalSince(env.now())
            if wait > 0 {
                await wake.wait(seconds: wait)
                continue
            }
            await attempt(name, sink, rows)
            if state.withLock({ $0.unrecorded[name] != nil }) { await wake.wait(seconds: Self.stateRetry) }
        }
    }

    /// Removes deliveries the sink accepted but the outbox could not mark done (disk full,
    /// read-only): they are never sent again. False while the state still cannot be written.
    private func recordUnrecorded(_ name: String) -> Bool {
        guard let ids = state.withLock({ $0.unrecorded[name] }) else { return true }
        if ids.isEmpty {  // (only a pause was asked for, after a failed write)
            state.withLock { $0.unrecorded[name] = nil }
            return true
        }
        do {
            try outbox.markDelivered(ids)
        } catch {
            stateLog.failed(name, "outbox: cannot record deliveries to sink \(name) in \(outbox.store.path): \(error)", logger: logger)
            return false
        }
        state.withLock { $0.unrecorded[name] = nil }
        stateLog.succeeded(name, "outbox: recorded \(ids.count) earlier deliveries to sink \(name); \(outbox.store.path) is writable again", logger: logger)
        return true
    }

    /// Delivers everything currently due, once per row, without waiting for retries
    /// (`tidings check --deliver`). Returns the sinks that failed, with the reason.
    public func drainOnce() async -> [String: String] {
        var failures: [String: String] = [:]
        for (name, sink) in sinks.sorted(by: { $0.key < $1.key }) {
            while true {
                let rows: [Delivery]
                do {
                    rows = try outbox.head(sink: name, batch: sink.acceptsBatches)
                } catch {
                    // A state error must reach the caller's exit status, not pass for an empty queue.
                    failures[name] = "cannot read its deliveries from the state database \(outbox.store.path): \(error)"
                    break
                }
                guard let head = rows.first, head.nextAttempt <= env.now().addingTimeInterval(0.5) else { break }
                let err = await attempt(name, sink, rows)
                if !recordUnrecorded(name) {
                    failures[name] = "delivered, but the state database could not record it (see the log); it is not sent again by this run"
                    break
                }
                if let err {
                    failures[name] = err.message
                    // A dead letter does not hold up the rest of the queue; anything else does.
                    if err.category != .permanent { break }
                }
            }
        }
        return failures
    }

    /// One delivery attempt. Returns the error on failure.
    @discardableResult
    private func attempt(_ name: String, _ sink: any Sink, _ rows: [Delivery]) async -> DeliveryError? {
        let ids = rows.map(\.id)
        let events = rows.map(\.event)
        let attempts = (rows.map(\.attempts).max() ?? 0) + 1
        var log = logger
        log[metadataKey: "sink"] = "\(name)"
        do {
            try await withTimeout(callTimeout, onTimeout: { DeliveryError(.retryable, "sink did not answer within \(DurationParser.format(self.callTimeout))") }) {
                try await sink.deliver(events)
            }
        } catch {
            let de = (error as? DeliveryError) ?? DeliveryError(.retryable, "\(error)")
            record(de, name: name, rows: rows, attempts: attempts, log: log)
            return de
        }
        if state.withLock({ $0.failing.remove(name) != nil }) {
            log.notice("sink \(name) recovered")
        }
        for e in events { log.info("delivered \(e.event.rawValue) \(e.kind) \(e.id) (\(e.source))") }
        // The sink has it: if the outbox cannot record that (disk full), remember it here so it
        // is not sent again, and record it once the state can be written.
        state.withLock { $0.unrecorded[name] = ids }
        _ = recordUnrecorded(name)
        return nil
    }

    private func record(_ de: DeliveryError, name: String, rows: [Delivery], attempts: Int, log: Logger) {
        let ids = rows.map(\.id)
        let now = env.now()
        do {
            switch de.category {
            case .permanent:
                try outbox.markDead(ids, attempts: attempts, error: de.message)
                log.error("sink \(name) refused event \(rows[0].event.id): \(de.message); not retrying (see `tidings outbox`)")
            case .gone:
                try outbox.markRetry(ids, attempts: attempts, next: now, error: de.message)
                state.withLock { _ = $0.disabled.insert(name) }
                log.critical("SINK \(name) DISABLED until reload: \(de.message). Its deliveries stay queued; fix the sink and send SIGHUP.")
            case .retryable:
                let age = now.timeIntervalSince(rows.map(\.createdAt).min() ?? now)
                if age >= policy.maxAge {
                    let msg = "gave up after \(attempts) attempts over \(DurationParser.format(age)): \(de.message)"
                    try outbox.markDead(ids, attempts: attempts, error: msg)
                    log.error("sink \(name): \(msg)")
                    return
                }
                let delay = policy.delay(afterAttempts: attempts, unit: env.unit(), retryAfter: de.retryAfter)
                try outbox.markRetry(ids, attempts: attempts, next: now.addingTimeInterval(delay), error: de.message)
                let first = state.withLock { $0.failing.insert(name).inserted }
                let text = "delivery to sink \(name) failed (attempt \(attempts)): \(de.message); retrying in \(DurationParser.format(delay))"
                if first { log.warning("\(text)") } else { log.debug("\(text)") }
            }
            stateLog.succeeded(name, "outbox: \(outbox.store.path) is writable again", logger: log)
        } catch {
            // Nothing changed in the outbox: the loop waits before trying this delivery again.
            state.withLock { $0.unrecorded[name] = $0.unrecorded[name] ?? [] }
            stateLog.failed(name, "outbox: cannot record the result of a delivery to sink \(name) in \(outbox.store.path): \(error)", logger: log)
        }
    }
}
