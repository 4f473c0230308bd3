import Foundation
import GRDB

/// One outbox row as `tidings outbox` shows it.
public struct OutboxEntry: Sendable {
    /// `pending` (not tried yet), `retrying` (failed at least once, will be retried) or `dead`.
    public enum Status: String, Sendable { case pending, retrying, dead }
    /// The delivery number (`#N`, what `outbox retry` takes).
    public var id: Int64
    public var sink: String
    public var status: Status
    public var attempts: Int
    /// When the worker tries again (nil for dead ones).
    public var nextAttempt: Date?
    /// When it was queued, or requeued by `outbox retry`.
    public var createdAt: Date
    public var lastError: String?
    public var event: Event

    /// One JSON object (`tidings outbox --json`), the event in its DESIGN §4 shape.
    public var json: JSONValue {
        let eventJSON = (try? JSONValue.parse(Data(event.jsonLine().utf8))) ?? .null
        return [
            "id": .number(Double(id)), "sink": .string(sink), "status": .string(status.rawValue),
            "attempts": .number(Double(attempts)),
            "next_attempt": nextAttempt.map { .string(Timestamp.format($0)) } ?? .null,
            "created_at": .string(Timestamp.format(createdAt)),
            "last_error": lastError.map { .string($0) } ?? .null,
            "event": eventJSON,
        ]
    }
}

extension OutboxStore {
    /// Every queued and dead delivery, by sink, oldest first.
    public func entries() throws -> [OutboxEntry] {
        try store.db.read { db in
            try Row.fetchAll(db, sql: """
                SELECT d.id, d.sink, d.status, d.attempts, d.next_attempt, d.created_at, d.last_error, e.payload
                FROM delivery d JOIN event e ON e.seq = d.event_seq ORDER BY d.sink, d.id
                """).compactMap { r -> OutboxEntry? in
                guard let event = try? Event.decode(jsonLine: r[7]) else { return nil }
                let dead = (r[2] as String) == "dead"
                let attempts: Int = r[3]
                return OutboxEntry(
                    id: r[0], sink: r[1], status: dead ? .dead : attempts > 0 ? .retrying : .pending, attempts: attempts,
                    nextAttempt: dead ? nil : Date(timeIntervalSince1970: r[4]), createdAt: Date(timeIntervalSince1970: r[5]),
                    lastError: r[6], event: event)
            }
        }
    }

    /// Requeues dead deliveries: all of them, or the one with this delivery id, or every dead
    /// delivery of the event with this id. They start over (attempts and age reset). Returns how many.
    @discardableResult
    public func requeueDead(_ selector: String?, now: Date = Date()) throws -> Int {
        try store.db.write { db in
            let set = "UPDATE delivery SET status = 'pending', attempts = 0, next_attempt = ?, created_at = ?, last_error = NULL WHERE status = 'dead'"
            let t = now.timeIntervalSince1970
            guard let selector else {
                try db.execute(sql: set, arguments: [t, t])
                return db.changesCount
            }
            if let id = Int64(selector.hasPrefix("#") ? String(selector.dropFirst()) : selector) {
                try db.execute(sql: set + " AND id = ?", arguments: [t, t, id])
            } else {
                try db.execute(sql: set + " AND event_seq IN (SELECT seq FROM event WHERE id = ?)", arguments: [t, t, selector])
            }
            return db.changesCount
        }
    }
}
