import Foundation
import GRDB

/// One queued delivery of one event to one sink.
public struct Delivery: Sendable {
    public var id: Int64
    public var sink: String
    public var batch: String
    public var attempts: Int
    public var nextAttempt: Date
    public var createdAt: Date
    public var event: Event
}

/// Outbox rows: reading the head of a sink's queue and recording what happened to it.
public struct OutboxStore: Sendable {
    public let store: StateStore
    public init(store: StateStore) { self.store = store }

    /// The oldest pending delivery for `sink` (per-sink order is by id), and, for batching
    /// sinks, the rest of its poll's batch.
    public func head(sink: String, batch wantBatch: Bool) throws -> [Delivery] {
        try store.db.read { db in
            let sql = """
                SELECT d.id, d.sink, d.batch, d.attempts, d.next_attempt, d.created_at, e.payload
                FROM delivery d JOIN event e ON e.seq = d.event_seq
                WHERE d.sink = ? AND d.status = 'pending' ORDER BY d.id LIMIT 1
                """
            guard let first = try Row.fetchOne(db, sql: sql, arguments: [sink]).flatMap(Self.delivery) else { return [] }
            guard wantBatch else { return [first] }
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.id, d.sink, d.batch, d.attempts, d.next_attempt, d.created_at, e.payload
                FROM delivery d JOIN event e ON e.seq = d.event_seq
                WHERE d.sink = ? AND d.status = 'pending' AND d.batch = ? ORDER BY d.id LIMIT 1000
                """, arguments: [sink, first.batch])
            return rows.compactMap(Self.delivery)
        }
    }

    static func delivery(_ r: Row) -> Delivery? {
        guard let event = try? Event.decode(jsonLine: r[6]) else { return nil }
        return Delivery(id: r[0], sink: r[1], batch: r[2], attempts: r[3], nextAttempt: Date(timeIntervalSince1970: r[4]),
                        createdAt: Date(timeIntervalSince1970: r[5]), event: event)
    }

    /// Delivered: the rows go away (the event stays in history).
    public func markDelivered(_ ids: [Int64]) throws {
        try store.db.write { db in
            try db.execute(sql: "DELETE FROM delivery WHERE id IN (\(ids.map { _ in "?" }.joined(separator: ",")))", arguments: StatementArguments(ids))
        }
    }

    public func markRetry(_ ids: [Int64], attempts: Int, next: Date, error: String) throws {
        try store.db.write { db in
            try db.execute(
                sql: "UPDATE delivery SET attempts = ?, next_attempt = ?, last_error = ? WHERE id IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                arguments: StatementArguments([attempts, next.timeIntervalSince1970, error] as [any DatabaseValueConvertible]) + StatementArguments(ids))
        }
    }

    public func markDead(_ ids: [Int64], attempts: Int, error: String) throws {
        try store.db.write { db in
            try db.execute(
                sql: "UPDATE delivery SET status = 'dead', attempts = ?, last_error = ? WHERE id IN (\(ids.map { _ in "?" }.joined(separator: ",")))",
                arguments: StatementArguments([attempts, error] as [any DatabaseValueConvertible]) + StatementArguments(ids))
        }
    }

    /// At daemon start: pending deliveries are retried right away.
    public func retryPendingNow(_ now: Date) throws {
        try store.db.write { db in
            try db.execute(sql: "UPDATE delivery SET next_attempt = ? WHERE status = 'pending' AND next_attempt > ?",
                           arguments: [now.timeIntervalSince1970, now.timeIntervalSince1970])
        }
    }

    /// Sinks that have pending rows (including sinks no longer configured).
    public func sinksWithPending() throws -> [String] {
        try store.db.read { db in try String.fetchAll(db, sql: "SELECT DISTINCT sink FROM delivery WHERE status = 'pending'") }
    }
}
