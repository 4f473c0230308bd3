import FoundationEssentials
import TidingsPluginAPI

/// `repeat_interval` (DESIGN §10): a `reminder` event for an item still present with severity
/// warning or critical, through each route whose interval has passed since the item last
/// changed or was last reminded of there ("still present since …").
///
/// Runs inside the poll's transaction (see ``PollRecorder``), after de-duplication, so an item
/// that changed in this poll (`changed_at` = now) is never also reminded of. Only polls that
/// route and count for the schedule remind: not `check --dry-run`, not `check` without
/// `--deliver` (it routes nothing, and recording a reminder there would take it from the
/// daemon), not a poll on request while the daemon runs.
enum Reminders {
    /// One reminder to send: the event, and the routes (``Route/identity``) it goes through:
    /// only those whose interval passed, not every route that matches it.
    struct Due {
        var change: Deduplicator.Change
        var event: Event
        var routes: Set<String>
    }

    /// The severities reminded of: warning and critical.
    static let severities = Severity.allCases.filter { $0 >= .warning }

    /// What a poll inserts for its reminders.
    struct Batch {
        var events: [Event] = []
        /// Event id → the routes it goes through (``Router/decisions(for:at:through:)``).
        var through: [String: Set<String>] = [:]
        /// Set when more were due than `max_events`: one summary went out instead.
        var warning: String?
    }

    /// The reminders due in this poll, as events to insert: one per item, or over the source's
    /// `max_events` one summary through every route concerned (the rows are written either way,
    /// so the next ones come an interval later, not at the next poll).
    static func batch(_ db: any SQLConnection, source: SourceConfig, router: Router, now: Date) throws -> Batch {
        let due = try due(db, source: source, router: router, now: now)
        var batch = Batch()
        if due.count <= source.settings.maxEvents {
            batch.events = due.map(\.event)
            for d in due { batch.through[d.event.id] = d.routes }
        } else {
            let summary = EventFactory.summary(source: source, changes: due.map(\.change), now: now)
            batch.events = [summary]
            batch.through[summary.id] = due.reduce(into: []) { $0.formUnion($1.routes) }
            batch.warning = "\(summary.title); sent one summary reminder instead"
        }
        return batch
    }

    /// The reminders due in this poll for `source`, with their `reminder` rows written.
    private static func due(_ db: any SQLConnection, source: SourceConfig, router: Router, now: Date) throws -> [Due] {
        let intervals = router.routes.compactMap(\.attention.repeatInterval)
        guard let shortest = intervals.min() else { return [] }
        let sent = try SentReminders.fetch(db, source: source.name)
        var out: [Due] = []
        for candidate in try candidates(db, source: source.name, changedBefore: now.addingTimeInterval(-shortest)) {
            let item = candidate.stored
            // Routes match on source, provider, kind, severity and event type: known without
            // decoding the item, which only a due reminder needs.
            let probe = Event(
                id: "", source: source.name, provider: source.provider, kind: item.kind, event: .reminder, key: item.key,
                title: "", severity: candidate.severity, observedAt: now)
            var routes = Set<String>()
            var count = 0
            for route in router.routes(for: probe) {
                guard let interval = route.attention.repeatInterval else { continue }
                let id = route.identity
                let last = sent[item.key]?[id]
                // The interval runs from the item's last change, or from the last reminder
                // through this route if that came later.
                let since = max(item.changedAt, last?.at ?? item.changedAt)
                guard now.timeIntervalSince(since) >= interval else { continue }
                routes.insert(id)
                count = max(count, last.map { $0.at >= item.changedAt ? $0.count + 1 : 1 } ?? 1)
            }
            guard !routes.isEmpty else { continue }
            for id in routes { try SentReminders.record(db, source: source.name, key: item.key, route: id, at: now, count: count) }
            let change = Deduplicator.Change(type: .reminder, item: item.item)
            var event = EventFactory.event(source: source, change: change, firstSeen: item.firstSeen, now: now)
            EventFactory.describeReminder(&event, since: item.firstSeen, count: count)
            out.append(Due(change: change, event: event, routes: routes))
        }
        return out
    }

    /// A returning item starts afresh: its rows go when it is gone (removal reported, or
    /// vanished during a baseline).
    static func forget(_ db: any SQLConnection, source: String, upserts: [StoredItem]) throws {
        for u in upserts where u.state == .gone { try db.execute("DELETE FROM reminder WHERE source = ? AND key = ?", source, u.key) }
    }

    /// An item that may be due: present, unchanged for at least the shortest interval, with
    /// severity warning or critical.
    private struct Candidate {
        var stored: StoredItem
        var severity: Severity
    }

    /// The candidates, oldest first. The severity is read from the stored JSON by SQLite, so
    /// long-lived info items are not decoded on every poll.
    private static func candidates(_ db: any SQLConnection, source: String, changedBefore: Date) throws -> [Candidate] {
        // Our own constants, not input: written into the SQL.
        let listed = severities.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        // SQLite reads the severity out of the stored JSON; elsewhere the rows are filtered
        // here (PostgreSQL's JSON types refuse some text JSON allows, such as \u0000).
        let severity = db.dialect == .sqlite ? "json_extract(snapshot, '$.severity')" : "NULL"
        let filter = db.dialect == .sqlite ? " AND severity IN (\(listed))" : ""
        let rows = try db.fetchAll(
            """
            SELECT key, kind, fingerprint, content_hash, first_seen, changed_at, snapshot, \(severity) AS severity
            FROM item WHERE source = ? AND state = \(StoredItem.State.present.sql) AND changed_at <= ?\(filter)
            ORDER BY first_seen, key
            """, source, changedBefore)
        var out: [Candidate] = []
        for r in rows {
            let stored = StoredItem(
                key: try r[0], kind: try r[1], fingerprint: try r[2], contentHash: try r[3], state: .present, firstSeen: try r[4],
                changedAt: try r[5], missingSince: nil, snapshot: try r[6])
            let level: String? = try r[7]
            let severity = level.map { Severity(rawValue: $0) ?? .warning } ?? stored.item.severity
            guard severities.contains(severity) else { continue }
            out.append(Candidate(stored: stored, severity: severity))
        }
        return out
    }
}

/// The `reminder` rows of one source: when each item was last reminded of through each route,
/// and how many reminders that was since its last change.
private struct SentReminders {
    struct Sent {
        var at: Date
        var count: Int
    }

    static func fetch(_ db: any SQLConnection, source: String) throws -> [String: [String: Sent]] {
        var out: [String: [String: Sent]] = [:]
        for r in try db.fetchAll("SELECT key, route, last_at, count FROM reminder WHERE source = ?", source) {
            out[try r[0], default: [:]][try r[1]] = Sent(at: try r[2], count: try r[3])
        }
        return out
    }

    static func record(_ db: any SQLConnection, source: String, key: String, route: String, at: Date, count: Int) throws {
        try db.execute(
            """
            INSERT INTO reminder(source, key, route, last_at, count) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(source, key, route) DO UPDATE SET last_at = excluded.last_at, count = excluded.count
            """, source, key, route, at, count)
    }
}

extension Route {
    /// Whether a reminder can match this route at all (its `severity` and `event` lists allow one).
    package var canRemind: Bool {
        (severity.map { list in Reminders.severities.contains { list.contains($0.rawValue) } } ?? true) && matchesEvent(.reminder)
    }

    /// A route's name in the `reminder` table: a hash of what it matches and where it sends, so
    /// that a reload (reordered routes, another `repeat_interval`, quiet hours) keeps it, and a
    /// route that matches or sends differently starts afresh.
    package var identity: String {
        let lists: [[String]?] = [source, provider, kind, severity, event]
        return Fingerprint.of(lists.map { $0.map { $0.joined(separator: "\u{1F}") } ?? "\u{1E}any" } + sinks)
    }
}

extension EventFactory {
    /// Words a reminder: the item as it is now, and since when it has been there
    /// (`data.since`, `data.reminder_count`: the how-manieth since its last change).
    static func describeReminder(_ event: inout Event, since: Date, count: Int) {
        let present =
            "Still present since \(Timestamp.format(since)) (for \(DurationParser.format(event.observedAt.timeIntervalSince(since))); reminder \(count))."
        event.body = event.body.isEmpty ? present : present + "\n" + event.body
        if case .object(var o) = event.data {
            o["since"] = .string(Timestamp.format(since))
            o["reminder_count"] = .number(Double(count))
            event.data = .object(o)
        }
    }
}
