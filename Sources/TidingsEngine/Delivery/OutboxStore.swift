import FoundationEssentials
import TidingsPluginAPI

/// One queued delivery of one event to one sink.
package struct Delivery: Sendable {
    package var id: Int64
    package var sink: String
    package var batch: String
    package var attempts: Int
    package var nextAttempt: Date
    package var createdAt: Date
    package var event: Event
    /// Why it was held (quiet hours, group_wait), if it was: held rows of one batch go out
    /// together, as a ``Digest`` to a sink that renders one.
    package var hold: Digest.Reason?
}

/// A queued row whose event cannot be read: a payload an older version wrote as `{}`, a
/// damaged one, or an event row that is gone. It can never be delivered.
package struct UnreadableDelivery: Sendable, Equatable {
    package var id: Int64
    package var sink: String
    /// The event's id, when its row is there.
    package var eventID: String?
    /// Why it cannot be read.
    package var reason: String
}

/// The front of one sink's queue.
package enum OutboxHead: Sendable {
    case empty
    /// The next deliveries in order: one, or for a batching sink the rest of its poll's batch.
    case due([Delivery])
    /// The next row cannot be read: it is to become a dead letter, and the sink goes on.
    case unreadable(UnreadableDelivery)
}

/// A `delivery` row with its event, as both the worker and `tidings outbox` read it.
struct DeliveryRow {
    static let select = """
        SELECT d.id, d.sink, d.batch, d.status, d.attempts, d.next_attempt, d.created_at, d.last_error, e.id, e.payload, d.hold_until, d.hold
        FROM delivery d LEFT JOIN event e ON e.seq = d.event_seq
        """

    var id: Int64
    var sink: String
    var batch: String
    var dead: Bool
    var attempts: Int
    var nextAttempt: Date
    var createdAt: Date
    var lastError: String?
    var eventID: String?
    /// The event, or why it cannot be read.
    var event: Result<Event, JSONParseError>
    /// Not sent before this time (quiet hours, group_wait); nil when not held.
    var heldUntil: Date?
    var hold: Digest.Reason?

    init(_ r: SQLRow) throws {
        id = try r[0]
        sink = try r[1]
        batch = try r[2]
        dead = (try r[3] as String) == "dead"
        attempts = try r[4]
        nextAttempt = try r[5]
        createdAt = try r[6]
        lastError = try r[7]
        eventID = try r[8]
        heldUntil = try r[10]
        hold = (try r[11] as String?).flatMap(Digest.Reason.init(rawValue:))
        if let payload = try r[9] as String? {
            event = Result { () throws(JSONParseError) in try Event.decode(jsonLine: payload) }
        } else {
            event = .failure(JSONParseError(message: "its event is missing from the state"))
        }
    }

    var delivery: Delivery? {
        guard case .success(let e) = event else { return nil }
        return Delivery(id: id, sink: sink, batch: batch, attempts: attempts, nextAttempt: nextAttempt, createdAt: createdAt, event: e, hold: hold)
    }

    var unreadable: UnreadableDelivery? {
        guard case .failure(let why) = event else { return nil }
        return UnreadableDelivery(id: id, sink: sink, eventID: eventID, reason: "cannot read the stored event: \(why.message)")
    }
}

/// Outbox rows: reading the head of a sink's queue and recording what happened to it.
package struct OutboxStore: Sendable {
    package let store: StateStore
    /// The most rows of one held batch that go out as one digest (``defaultDigestLimit``).
    package var digestLimit = OutboxStore.defaultDigestLimit
    package init(store: StateStore) { self.store = store }

    /// The front of `sink`'s queue at `now`: its oldest pending delivery that is not held
    /// (per-sink order is by id; a held row waits without holding up the rows behind it) and,
    /// with `batch`, the rest of its batch up to the first row that cannot be read: the rest of
    /// its poll, or of its digest when it was held. With `digests` (a sink that renders them)
    /// a held row brings the rest of its batch too, but a poll's rows still come one by one:
    /// one refused event must not take the rest of its poll with it.
    package func head(sink: String, batch wantBatch: Bool, digests: Bool = false, now: Date) async throws -> OutboxHead {
        let digestLimit = self.digestLimit
        return try await store.database.read { try Self.head($0, sink: sink, batch: wantBatch, digests: digests, digestLimit: digestLimit, now: now) }
    }

    /// The most rows of one held batch that go out as one digest; a larger batch goes in parts.
    package static let defaultDigestLimit = 10_000
    /// The most rows of one poll's batch that go to a batching sink in one call.
    static let batchLimit = 1000

    static func head(
        _ db: any SQLConnection, sink: String, batch wantBatch: Bool, digests: Bool,
        digestLimit: Int = defaultDigestLimit, now: Date
    ) throws -> OutboxHead {
        let pending = DeliveryRow.select + " WHERE d.sink = ? AND d.status = \(DeliveryStatus.pending.sql)"
        let released = " AND (d.hold_until IS NULL OR d.hold_until <= ?)"
        guard let first = try db.fetchOne(pending + released + " ORDER BY d.id LIMIT 1", sink, now).map(DeliveryRow.init) else {
            return .empty
        }
        if let bad = first.unreadable { return .unreadable(bad) }
        guard wantBatch || (digests && first.hold != nil) else { return .due([first.delivery!]) }
        // A digest may gather a whole night: up to `digestLimit` rows go as one (its sinks cut
        // the text to their limits and say how many more); a poll's batch is capped lower.
        let limit = first.hold == nil ? batchLimit : digestLimit
        let rows = try db.fetchAll(pending + " AND d.batch = ? ORDER BY d.id LIMIT \(limit)", sink, first.batch).map(DeliveryRow.init)
        return .due(Array(rows.lazy.prefix { $0.unreadable == nil }.compactMap(\.delivery)))
    }

    /// Delivered: the rows go away (the event stays in history).
    package func markDelivered(_ ids: [Int64]) async throws {
        try await store.database.write { db in
            try db.execute("DELETE FROM delivery WHERE id IN (\(Self.list(ids)))", ids.map(\.sqlValue))
        }
    }

    package func markRetry(_ ids: [Int64], attempts: Int, next: Date, error: String) async throws {
        try await store.database.write { db in
            try db.execute(
                "UPDATE delivery SET attempts = ?, next_attempt = ?, last_error = ? WHERE id IN (\(Self.list(ids)))",
                [attempts.sqlValue, next.sqlValue, error.sqlValue] + ids.map(\.sqlValue))
        }
    }

    /// `?, ?, …` for the ids of an `IN (…)`.
    private static func list(_ ids: [Int64]) -> String { SQL.placeholders(ids.count) }

    /// Dead letters: never tried again unless `tidings outbox retry` requeues them.
    /// `attempts` nil keeps the count (a row that was never tried).
    package func markDead(_ ids: [Int64], attempts: Int?, error: String) async throws {
        try await store.database.write { db in
            try db.execute(
                "UPDATE delivery SET status = \(DeliveryStatus.dead.sql), attempts = COALESCE(?, attempts), last_error = ? WHERE id IN (\(Self.list(ids)))",
                [attempts.sqlValue, error.sqlValue] + ids.map(\.sqlValue))
        }
    }

    /// At daemon start: pending deliveries are retried right away. `sinks`: only those (the
    /// sinks this instance delivers to, where daemons share the state); nil: all.
    package func retryPendingNow(_ now: Date, sinks: [String]? = nil) async throws {
        try await store.database.write { db in
            var sql = "UPDATE delivery SET next_attempt = ? WHERE status = \(DeliveryStatus.pending.sql) AND next_attempt > ?"
            var args = [now.sqlValue, now.sqlValue]
            if let sinks {
                guard !sinks.isEmpty else { return }
                sql += " AND sink IN (\(SQL.placeholders(sinks.count)))"
                args += sinks.map(\.sqlValue)
            }
            try db.execute(sql, args)
        }
    }

    /// When the next held delivery of `sink` is released (quiet hours end, a group closes).
    package func nextRelease(sink: String) async throws -> Date? {
        try await store.database.read { db in
            try db.scalar(
                "SELECT min(hold_until) FROM delivery WHERE sink = ? AND status = \(DeliveryStatus.pending.sql) AND hold_until IS NOT NULL", [sink.sqlValue])
        }
    }

    /// Sinks that have pending rows (including sinks no longer configured).
    package func sinksWithPending() async throws -> [String] {
        try await store.database.read { db in
            try db.fetchAll("SELECT DISTINCT sink FROM delivery WHERE status = \(DeliveryStatus.pending.sql)").map { try $0[0] }
        }
    }
}

extension OutboxStore {
    /// Held rows follow the routes loaded now (``HeldPlacement/follow(_:routes:now:)``): a rule
    /// that no longer holds them releases them. Returns how many rows were released earlier.
    package func followRoutes(_ routes: [Route], now: Date) async throws -> Int {
        try await store.database.write { db in try HeldPlacement.follow(db, routes: routes, now: now) }
    }

    /// Silences apply when a held delivery comes due, not only when its event was routed
    /// (Alertmanager mutes at notify time): a silence added while a row waited for quiet hours
    /// to end keeps it back. Of `rows`, those an active silence matches are not delivered:
    /// their row goes, their event is marked in history as silenced by it (unless it was
    /// already) and the silence counts it. Returns the rest, in order.
    func silenceDue(_ rows: [Delivery], now: Date) async throws -> [Delivery] {
        try await store.database.write { db in
            let silences = try SilenceStore.active(db, at: now)
            guard !silences.isEmpty else { return rows }
            var kept: [Delivery] = []
            for row in rows {
                guard let silence = silences.first(where: { $0.matches(row.event) }) else {
                    kept.append(row)
                    continue
                }
                try db.execute("DELETE FROM delivery WHERE id = ?", row.id)
                if try db.execute("UPDATE event SET silenced_by = ? WHERE id = ? AND silenced_by IS NULL", silence.id, row.event.id) > 0 {
                    try SilenceStore.countSilenced(db, id: silence.id)
                }
            }
            return kept
        }
    }
}
