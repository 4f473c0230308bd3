import Foundation
import GRDB

/// A source's health and schedule as stored (for `tidings sources`).
public struct SourceStatus: Sendable {
    public var source: String
    public var lastSuccess: Date?
    public var lastError: String?
    public var lastErrorAt: Date?
    public var failures: Int
    public var nextDue: Date?
    public var authFailedHash: String?
    public var baselineDone: Bool
    public var items: Int
}

/// A source's health as stored: see ``StateStore/sourceHealth()``.
package struct SourceHealth: Sendable, Equatable {
    /// Failed polls in a row (0: the last counted poll succeeded).
    package var failures: Int
    package var lastSuccess: Date?
}

extension StateStore {
    public func statuses() throws -> [String: SourceStatus] {
        try db.read { db in
            let counts = Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT source, count(*) FROM item WHERE state != 'gone' GROUP BY source").map { ($0[0] as String, $0[1] as Int) })
            var out: [String: SourceStatus] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT source, last_success, last_error, last_error_at, failures, next_due, auth_failed_hash, baseline_at FROM source_state") {
                let name: String = r[0]
                out[name] = SourceStatus(
                    source: name, lastSuccess: (r[1] as Double?).map(Date.init(timeIntervalSince1970:)), lastError: r[2],
                    lastErrorAt: (r[3] as Double?).map(Date.init(timeIntervalSince1970:)), failures: r[4],
                    nextDue: (r[5] as Double?).map(Date.init(timeIntervalSince1970:)), authFailedHash: r[6],
                    baselineDone: (r[7] as Double?) != nil, items: counts[name] ?? 0)
            }
            return out
        }
    }

    /// Each stored source's failures in a row and last success: what the daemon's status line
    /// and health metrics start from (cheaper than ``statuses()``, which counts items too).
    package func sourceHealth() throws -> [String: SourceHealth] {
        try db.read { db in
            var out: [String: SourceHealth] = [:]
            for r in try Row.fetchAll(db, sql: "SELECT source, failures, last_success FROM source_state") {
                out[r[0]] = SourceHealth(failures: r[1], lastSuccess: (r[2] as Double?).map(Date.init(timeIntervalSince1970:)))
            }
            return out
        }
    }

    /// One row of `tidings history`: an event, or a stored row that cannot be read back (written
    /// by an older version), shown with the reason instead of being hidden.
    public enum HistoryEntry: Sendable {
        /// An event; `silencedBy` is the id of the silence that kept it from its sinks.
        case event(Event, silencedBy: String?)
        case unreadable(id: String, source: String, reason: String)
    }

    /// Recent events, newest last.
    public func history(source: String?, limit: Int) throws -> [HistoryEntry] {
        try db.read { db in
            let sql = "SELECT id, source, payload, silenced_by FROM event \(source == nil ? "" : "WHERE source = ? ")ORDER BY seq DESC LIMIT ?"
            let arguments: StatementArguments = source.map { [$0, limit] } ?? [limit]
            return try Row.fetchAll(db, sql: sql, arguments: arguments).reversed().map { r in
                do { return .event(try Event.decode(jsonLine: r[2]), silencedBy: r[3]) } catch {
                    return .unreadable(id: r[0], source: r[1], reason: "\(error)")
                }
            }
        }
    }

    /// The readable events of ``history(source:limit:)``.
    public func historyEvents(source: String?, limit: Int) throws -> [Event] {
        try history(source: source, limit: limit).compactMap { if case .event(let e, _) = $0 { return e } else { return nil } }
    }

    /// Drops a source's items, status and notices: its next poll is a silent baseline. History stays.
    @discardableResult
    public func forget(source: String) throws -> Int {
        try db.write { db in
            try db.execute(sql: "DELETE FROM item WHERE source = ?", arguments: [source])
            let items = db.changesCount
            try db.execute(sql: "DELETE FROM source_state WHERE source = ?", arguments: [source])
            try db.execute(sql: "DELETE FROM notice WHERE source = ?", arguments: [source])
            try db.execute(sql: "DELETE FROM reminder WHERE source = ?", arguments: [source])
            return items
        }
    }

    /// Deletes events older than `days` that no delivery still needs, and long-gone items.
    @discardableResult
    public func prune(olderThanDays days: Int, now: Date = Date()) throws -> (events: Int, items: Int) {
        let cutoff = now.addingTimeInterval(-Double(days) * 86_400).timeIntervalSince1970
        return try db.write { db in
            try db.execute(sql: "DELETE FROM event WHERE observed_at < ? AND seq NOT IN (SELECT event_seq FROM delivery)", arguments: [cutoff])
            let events = db.changesCount
            try db.execute(sql: "DELETE FROM item WHERE state = 'gone' AND changed_at < ?", arguments: [cutoff])
            let items = db.changesCount
            // Notices that ended, were dismissed or expired long ago are no longer pending anywhere.
            try db.execute(sql: """
                DELETE FROM notice WHERE updated_at < ?
                  AND (ended_at IS NOT NULL OR dismissed_at IS NOT NULL OR expires_at < ?)
                """, arguments: [cutoff, cutoff])
            // Silences that ended long ago (history keeps the ids of the events they held back).
            try db.execute(sql: "DELETE FROM silence WHERE ends_at < ?", arguments: [cutoff])
            return (events, items)
        }
    }
}
