import FoundationEssentials
import TidingsPluginAPI

/// One outbox row as `tidings outbox` shows it.
package struct OutboxEntry: Sendable {
    /// `pending` (not tried yet), `held` (waiting for a route's quiet hours to end or its
    /// `group_wait` to close), `retrying` (failed at least once, will be retried) or `dead`.
    package enum Status: String, Sendable { case pending, held, retrying, dead }

    /// Why a delivery was held and until when (DESIGN §10). Kept after the time has come (the
    /// row then goes out as part of its digest), so `--json` still says it was held.
    package struct Hold: Sendable, Equatable {
        package var until: Date
        package var reason: Digest.Reason

        package init(until: Date, reason: Digest.Reason) {
            self.until = until
            self.reason = reason
        }

        /// `held until 07:00 (quiet hours)`, `grouping until 12:00:05`: the time in `timeZone`,
        /// with seconds when they are not zero and the date when it is not `now`'s day there.
        package func description(now: Date, timeZone: Zone = .current) -> String {
            let when = Self.clock(until, now: now, timeZone: timeZone)
            switch reason {
            case .quietHours: return "held until \(when) (quiet hours)"
            case .grouped: return "grouping until \(when)"
            }
        }

        static func clock(_ date: Date, now: Date, timeZone: Zone) -> String {
            let c = timeZone.civil(at: date)
            let today = timeZone.civil(at: now)
            var text = QuietHours.TimeOfDay(seconds: c.hour * 3600 + c.minute * 60 + c.second).description
            if (c.year, c.month, c.day) != (today.year, today.month, today.day) {
                text = CivilTime.pad(c.year, 4) + "-" + CivilTime.pad(c.month) + "-" + CivilTime.pad(c.day) + " " + text
            }
            return text
        }
    }
    /// The delivery number (`#N`, what `outbox retry` takes).
    package var id: Int64
    package var sink: String
    package var status: Status
    package var attempts: Int
    /// When the worker tries again (nil for dead ones).
    package var nextAttempt: Date?
    /// When it was queued, or requeued by `outbox retry`.
    package var createdAt: Date
    /// Why it failed; for a row whose event cannot be read, why not.
    package var lastError: String?
    /// The event's id (also when the event itself cannot be read).
    package var eventID: String?
    /// The event; nil when the stored event cannot be read (such a row is dead).
    package var event: Event?
    /// Set when a route held it (quiet hours, group_wait); ``status`` is `held` while its time
    /// is still to come.
    package var hold: Hold?

    /// One JSON object (`tidings outbox --json`), the event in its DESIGN §4 shape.
    package var json: JSONValue { jsonValue }
}

extension OutboxEntry: JSONObjectShape {
    package enum Member: String, CaseIterable {
        case attempts
        case createdAt = "created_at"
        case event
        case eventID = "event_id"
        case heldUntil = "held_until"
        case hold
        case id
        case lastError = "last_error"
        case nextAttempt = "next_attempt"
        case sink, status
    }

    package func value(of member: Member) -> JSONValue? {
        switch member {
        case .attempts: return .number(Double(attempts))
        case .createdAt: return .string(Timestamp.format(createdAt))
        case .event: return event?.jsonValue ?? .null
        case .eventID: return eventID.map(JSONValue.string) ?? .null
        case .heldUntil: return hold.map { .string(Timestamp.format($0.until)) } ?? .null
        case .hold: return hold.map { .string($0.reason.rawValue) } ?? .null
        case .id: return .number(Double(id))
        case .lastError: return lastError.map(JSONValue.string) ?? .null
        case .nextAttempt: return nextAttempt.map { .string(Timestamp.format($0)) } ?? .null
        case .sink: return .string(sink)
        case .status: return .string(status.rawValue)
        }
    }
}

extension OutboxEntry {
    /// A row as stored, at `now`. One whose event cannot be read is shown as what it is, a dead
    /// letter with the reason, even before the worker has marked it so.
    init(_ row: DeliveryRow, now: Date) {
        let unreadable = row.unreadable
        let dead = row.dead || unreadable != nil
        var hold: Hold?
        if let until = row.heldUntil, let reason = row.hold { hold = Hold(until: until, reason: reason) }
        let status: Status = dead ? .dead : (hold?.until ?? now) > now ? .held : row.attempts > 0 ? .retrying : .pending
        self.init(
            id: row.id, sink: row.sink, status: status, attempts: row.attempts,
            nextAttempt: dead ? nil : status == .held ? hold?.until : row.nextAttempt, createdAt: row.createdAt,
            lastError: row.dead ? row.lastError ?? unreadable?.reason : unreadable?.reason ?? row.lastError,
            eventID: row.eventID, event: row.delivery?.event, hold: hold)
    }
}

/// How many deliveries one sink has queued, held and dead.
package struct OutboxBacklog: Sendable, Equatable {
    /// Queued to go as soon as the sink takes them (waiting or retrying).
    package var pending = 0
    /// Held by a route's quiet hours or group_wait until a time still to come.
    package var held = 0
    package var dead = 0
    package init(pending: Int = 0, held: Int = 0, dead: Int = 0) {
        self.pending = pending
        self.held = held
        self.dead = dead
    }
}

extension OutboxStore {
    /// Queued, held and dead deliveries per sink at `now`; a sink with none is absent.
    package func backlog(now: Date = Date()) throws -> [String: OutboxBacklog] {
        try store.database.read { db in try Self.backlog(db, now: now) }
    }

    package static func backlog(_ db: any SQLConnection, now: Date) throws -> [String: OutboxBacklog] {
        var out: [String: OutboxBacklog] = [:]
        let sql = "SELECT sink, status, CASE WHEN hold_until > ? THEN 1 ELSE 0 END, count(*) FROM delivery GROUP BY 1, 2, 3"
        for r in try db.fetchAll(sql, now) {
            let n: Int = try r[3]
            let sink: String = try r[0]
            if (try r[1] as String) == "dead" {
                out[sink, default: OutboxBacklog()].dead += n
            } else if try r[2] as Bool {
                out[sink, default: OutboxBacklog()].held += n
            } else {
                out[sink, default: OutboxBacklog()].pending += n
            }
        }
        return out
    }

    /// Deliveries held at `now` for one sink until one time for one reason: what
    /// `tidings status` shows instead of every row.
    package struct HeldGroup: Sendable, Equatable {
        package var sink: String
        package var hold: OutboxEntry.Hold
        package var count: Int
    }

    /// The held deliveries at `now`, grouped by sink, reason and end of the hold (soonest first).
    package static func heldGroups(_ db: any SQLConnection, now: Date) throws -> [HeldGroup] {
        let sql =
            "SELECT sink, hold, hold_until, count(*) FROM delivery WHERE status != \(DeliveryStatus.dead.sql) AND hold_until > ? GROUP BY sink, hold, hold_until ORDER BY sink, hold_until"
        return try db.fetchAll(sql, now).compactMap { r -> HeldGroup? in
            guard let reason = Digest.Reason(rawValue: (try r[1] as String?) ?? "") else { return nil }
            return HeldGroup(sink: try r[0], hold: OutboxEntry.Hold(until: try r[2], reason: reason), count: try r[3])
        }
    }

    /// Each sink's newest dead letter's error (sinks without dead letters are absent).
    package static func lastDeadErrors(_ db: any SQLConnection) throws -> [String: String] {
        var out: [String: String] = [:]
        for r in try db.fetchAll(
            "SELECT sink, last_error FROM delivery WHERE id IN (SELECT max(id) FROM delivery WHERE status = \(DeliveryStatus.dead.sql) GROUP BY sink)")
        {
            if let e: String = try r[1] { out[try r[0]] = e }
        }
        return out
    }

    /// Every queued, held and dead delivery (also those whose event cannot be read), by sink,
    /// oldest first, with their status at `now`.
    package func entries(now: Date = Date()) throws -> [OutboxEntry] {
        try store.database.read { db in
            try db.fetchAll(DeliveryRow.select + " ORDER BY d.sink, d.id").map { OutboxEntry(try DeliveryRow($0), now: now) }
        }
    }

    /// Deletes the dead delivery with this id (the status page's "drop"); a delivery that is not
    /// dead is left alone. Returns whether one was deleted.
    @discardableResult
    package func dropDead(id: Int64) throws -> Bool {
        try store.database.write { db in
            try db.execute("DELETE FROM delivery WHERE status = \(DeliveryStatus.dead.sql) AND id = ?", id) > 0
        }
    }

    /// Requeues dead deliveries: all of them, or the one with this delivery id, or every dead
    /// delivery of the event with this id. They start over (attempts and age reset). Returns how many.
    @discardableResult
    package func requeueDead(_ selector: String?, now: Date = Date()) throws -> Int {
        try store.database.write { db in
            let set =
                "UPDATE delivery SET status = \(DeliveryStatus.pending.sql), attempts = 0, next_attempt = ?, created_at = ?, last_error = NULL WHERE status = \(DeliveryStatus.dead.sql)"
            guard let selector else {
                return try db.execute(set, now, now)
            }
            if let id = Int64(selector.hasPrefix("#") ? String(selector.dropFirst()) : selector) {
                return try db.execute(set + " AND id = ?", now, now, id)
            } else {
                return try db.execute(set + " AND event_seq IN (SELECT seq FROM event WHERE id = ?)", now, now, selector)
            }
        }
    }
}
