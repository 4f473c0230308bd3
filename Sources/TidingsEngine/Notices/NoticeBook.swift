import FoundationEssentials
import TidingsPluginAPI

/// A broadcast notice that is still pending: not dismissed, not expired, not ended upstream.
package struct PendingNotice: Sendable, Equatable {
    /// The id of the latest event about it (what `tidings notices dismiss ID` takes).
    package var id: String
    package var source: String
    package var key: String
    package var title: String
    package var body: String
    package var url: String?
    package var severity: Severity
    package var createdAt: Date
    package var updatedAt: Date
    package var expiresAt: Date
    /// When the user last listed it (`tidings notices`); nil if never.
    package var seenAt: Date?
}

/// The lifecycle of broadcast notices, for every event of kind `notice` from any provider.
///
/// A `new` notice is pending until dismissed or expired: at the item's `expiresAt`
/// (a maintenance window's end) or after `notice_ttl`; a `removed` event (an incident
/// resolved, a maintenance finished) ends it. A `changed` event (a new incident update)
/// refreshes it and makes it pending again.
package enum NoticeBook {
    package static let kind = "notice"

    /// Applies one poll's changes; `events[i]` is the event made from `changes[i]`.
    /// Runs inside the poll's transaction (see ``PollRecorder``).
    static func record(_ db: any SQLConnection, source: String, changes: [Deduplicator.Change], events: [Event], ttl: TimeInterval, now: Date) throws {
        for (change, event) in zip(changes, events) where change.item.kind == kind {
            let expires = (change.item.expiresAt ?? now.addingTimeInterval(ttl)).timeIntervalSince1970
            switch change.type {
            case .new, .changed:
                try db.execute(
                    """
                    INSERT INTO notice(source, key, event_id, title, body, url, severity, created_at, updated_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(source, key) DO UPDATE SET event_id = excluded.event_id, title = excluded.title,
                      body = excluded.body, url = excluded.url, severity = excluded.severity,
                      created_at = CASE WHEN notice.ended_at IS NULL THEN notice.created_at ELSE excluded.created_at END,
                      updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                      seen_at = NULL, dismissed_at = NULL, ended_at = NULL, redelivered_at = NULL
                    """,
                    source, event.key, event.id, event.title, event.body, event.url, event.severity.rawValue, now, now, expires)
            case .removed:
                try db.execute("UPDATE notice SET ended_at = ? WHERE source = ? AND key = ? AND ended_at IS NULL", now, source, event.key)
            default:
                continue
            }
        }
    }

    private static let pendingSQL = "dismissed_at IS NULL AND ended_at IS NULL AND expires_at > ?"

    /// Pending notices, newest first.
    package static func pending(_ store: StateStore, now: Date = Date(), source: String? = nil) throws -> [PendingNotice] {
        try store.database.read { db in
            var sql = "SELECT event_id, source, key, title, body, url, severity, created_at, updated_at, expires_at, seen_at FROM notice WHERE \(pendingSQL)"
            var args = [now.sqlValue]
            if let source {
                sql += " AND source = ?"
                args.append(source.sqlValue)
            }
            sql += " ORDER BY updated_at DESC, source, key"
            return try db.fetchAll(sql, args).map { r in
                PendingNotice(
                    id: try r[0], source: try r[1], key: try r[2], title: try r[3], body: try r[4], url: try r[5],
                    severity: Severity(rawValue: try r[6]) ?? .info, createdAt: try r[7],
                    updatedAt: try r[8], expiresAt: try r[9], seenAt: try r[10])
            }
        }
    }

    /// Marks notices as seen by the user (listing them interactively).
    package static func markSeen(_ store: StateStore, ids: [String], now: Date = Date()) throws {
        guard !ids.isEmpty else { return }
        try store.database.write { db in
            for id in ids {
                try db.execute("UPDATE notice SET seen_at = ? WHERE event_id = ?", now, id)
            }
        }
    }

    package enum DismissError: Error, CustomStringConvertible, Equatable {
        case notFound(String)
        /// Several pending notices have this prefix (the candidates).
        case ambiguous(String, [PendingNotice])
        /// Shorter than ``IDPrefix/minimumLength`` (the pending notices it would match).
        case tooShort(String, [PendingNotice])

        package var description: String {
            switch self {
            case .notFound(let id): return "no pending notice with id \(id) (see `tidings notices`)"
            case .ambiguous(let id, let c): return "\(c.count) pending notices match \(id); give more of the id:"
            case .tooShort(let id, let c):
                return "notice id \(id) is too short: give at least \(IDPrefix.minimumLength) characters (as `tidings notices` shows)"
                    + (c.isEmpty ? "" : "; \(c.count) pending notice\(c.count == 1 ? "" : "s") start\(c.count == 1 ? "s" : "") with it:")
            }
        }

        package var candidates: [PendingNotice] {
            switch self {
            case .notFound: return []
            case .ambiguous(_, let c), .tooShort(_, let c): return c
            }
        }
    }

    /// Dismisses one pending notice by id, or by a prefix (at least ``IDPrefix/minimumLength``
    /// characters, any case) that only it has.
    @discardableResult
    package static func dismiss(_ store: StateStore, id: String, now: Date = Date()) throws -> PendingNotice {
        let all = try pending(store, now: now)
        func notices(_ ids: [String]) -> [PendingNotice] { all.filter { ids.contains($0.id) } }
        let chosen: PendingNotice
        switch IDPrefix.resolve(id, among: all.map(\.id)) {
        case .one(let full): chosen = notices([full])[0]
        case .none: throw DismissError.notFound(id)
        case .ambiguous(let ids): throw DismissError.ambiguous(id, notices(ids))
        case .tooShort(let ids): throw DismissError.tooShort(id, notices(ids))
        }
        try store.database.write { db in
            try db.execute("UPDATE notice SET dismissed_at = ? WHERE source = ? AND key = ?", now, chosen.source, chosen.key)
        }
        return chosen
    }

    /// Dismisses every pending notice; returns how many.
    @discardableResult
    package static func dismissAll(_ store: StateStore, now: Date = Date()) throws -> Int {
        try store.database.write { db in
            try db.execute("UPDATE notice SET dismissed_at = ? WHERE \(pendingSQL)", now, now)
        }
    }

    /// At daemon start: pending notices the user has not seen since they were created (and that
    /// no silence kept back) are delivered again, once (one new outbox row per routed sink, same event id). A sink that
    /// still has the event queued (or dead) gets no second row: it will deliver (or has
    /// refused) that one, and a restart must not deliver the notice twice.
    /// Returns the events queued.
    @discardableResult
    package static func redeliverUnseen(_ store: StateStore, router: Router, now: Date = Date()) throws -> [Event] {
        try store.database.write { db in
            let rows = try db.fetchAll(
                """
                SELECT n.source, n.key, e.seq, e.payload FROM notice n JOIN event e ON e.id = n.event_id
                WHERE n.dismissed_at IS NULL AND n.ended_at IS NULL AND n.expires_at > ?
                  AND n.seen_at IS NULL AND n.redelivered_at IS NULL AND e.silenced_by IS NULL
                ORDER BY n.updated_at
                """, now)
            guard !rows.isEmpty else { return [] }
            let batch = EventID.make(at: now)
            var out: [Event] = []
            for r in rows {
                let seq: Int64 = try r[2]
                guard let event = try? Event.decode(jsonLine: try r[3] as String) else { continue }
                let queued = Set(try db.fetchAll("SELECT sink FROM delivery WHERE event_seq = ?", seq).map { try $0[0] as String })
                // Quiet hours and group_wait apply as to any event routed now.
                let decisions = router.decisions(for: event, at: now).filter { !queued.contains($0.sink) }
                try Enqueue.deliveries(db, eventSeq: seq, decisions, batch: batch, now: now)
                try db.execute("UPDATE notice SET redelivered_at = ? WHERE source = ? AND key = ?", now, try r[0] as String, try r[1] as String)
                if !decisions.isEmpty { out.append(event) }
            }
            return out
        }
    }
}
