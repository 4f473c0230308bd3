import FoundationEssentials
import TidingsPluginAPI

/// Outbox rows for one event, as the router decided: sent as soon as the worker gets to them,
/// or held for a route's quiet hours or `group_wait` (``HeldPlacement``). The one place that
/// inserts `delivery` rows.
enum Enqueue {
    /// `batch`: the poll's batch (a batching sink gets the poll's events together).
    static func deliveries(_ db: any SQLConnection, eventSeq: Int64, _ decisions: [RouteDecision], batch: String, now: Date) throws {
        let insert = """
            INSERT INTO delivery(event_seq, sink, batch, status, next_attempt, created_at, hold_until, hold) VALUES (?, ?, ?, \(DeliveryStatus.pending.sql), ?, ?, ?, ?)
            """
        for decision in decisions {
            guard let hold = decision.hold else {
                try db.execute(insert, eventSeq, decision.sink, batch, now, now, SQLValue.null, SQLValue.null)
                continue
            }
            let held = try HeldPlacement.place(db, hold: hold, sink: decision.sink, now: now)
            try db.execute(insert, eventSeq, decision.sink, held.batch, now, now, held.until, held.reason.rawValue)
        }
    }
}

/// Where a held delivery goes in the outbox (DESIGN §10): its batch, shared by every row that
/// is to go out with it as one digest, and the time before which it is not sent.
struct HeldPlacement: Equatable {
    var batch: String
    var until: Date
    var reason: Digest.Reason

    /// Quiet hours: one batch per (route, sink, end of window), so everything held in one window
    /// goes out together. `group_wait`: the sink's open group of that route if one is still
    /// collecting, else a new group closing `wait` from now (Alertmanager's group_wait: counted
    /// from the first event).
    static func place(_ db: any SQLConnection, hold: Hold, sink: String, now: Date) throws -> HeldPlacement {
        switch hold {
        case .quietHours(let until, let route):
            return HeldPlacement(batch: "quiet:\(route):\(Int(until.timeIntervalSince1970)):\(sink)", until: until, reason: .quietHours)
        case .group(let wait, let route):
            let prefix = "group:\(route):"
            if let open = try db.fetchOne(
                """
                SELECT batch, hold_until FROM delivery
                WHERE sink = ? AND status = \(DeliveryStatus.pending.sql) AND hold = 'group' AND hold_until > ? AND substr(batch, 1, length(?)) = ?
                ORDER BY id DESC LIMIT 1
                """, sink, now, prefix, prefix)
            {
                return HeldPlacement(batch: try open[0], until: try open[1], reason: .grouped)
            }
            return HeldPlacement(batch: prefix + EventID.make(at: now), until: now.addingTimeInterval(wait), reason: .grouped)
        }
    }
}

extension HeldPlacement {
    /// After a reload (or a restart) with other routes: held rows follow the rule that now
    /// holds them. A route that lost its `quiet_hours` or `group_wait` releases its held rows at
    /// once (they no longer wait for the old end, up to hours); quiet hours that now end
    /// earlier, or no longer cover this moment, release them then. A rule that is still there
    /// and holds as long is left alone. Returns how many rows were released or moved earlier.
    ///
    /// Rows are told apart by their batch (`quiet:ROUTE:END:SINK`, `group:ROUTE:ID`): the route
    /// is the rule's position, as the router numbers them.
    static func follow(_ db: any SQLConnection, routes: [Route], now: Date) throws -> Int {
        let held = try db.fetchAll(
            """
            SELECT batch, hold, min(hold_until) FROM delivery
            WHERE status = \(DeliveryStatus.pending.sql) AND hold IS NOT NULL AND hold_until > ? GROUP BY batch, hold
            """, now)
        var moved = 0
        for row in held {
            let batch: String = try row[0]
            let until: Date = try row[2]
            guard let reason = Digest.Reason(rawValue: try row[1]) else { continue }
            let parts = batch.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
            let route = parts.count > 1 ? Int(parts[1]).flatMap { routes.indices.contains($0) ? routes[$0] : nil } : nil
            let release: Date
            switch reason {
            case .quietHours:
                guard let quiet = route?.attention.quietHours, let end = quiet.end(ofWindowContaining: now) else {
                    release = now
                    break
                }
                release = min(end, until)
            case .grouped:
                release = route?.attention.groupWait == nil ? now : until
            }
            guard release < until else { continue }
            moved += try db.execute(
                "UPDATE delivery SET hold_until = ? WHERE batch = ? AND status = \(DeliveryStatus.pending.sql) AND hold_until > ?",
                release, batch, release)
        }
        return moved
    }
}
