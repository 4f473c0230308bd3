import Foundation
import Logging
import TidingsPluginAPI

/// What one recorded poll produced.
public struct PollRecord: Sendable {
    public var events: [Event] = []
    /// Non-nil when this poll was the silent baseline: how many items it stored.
    public var baselineCount: Int?
    /// Consecutive failures after this poll (0 on success).
    public var failures = 0
    /// The source's credentials were rejected; it waits for a config change.
    public var authFailed = false
    /// What the poll had to cut or hold back (items cut to size, events over `max_events`):
    /// one line each, for the log.
    public var warnings: [String] = []
    /// The events a silence kept from their sinks: event id → silence id.
    package var silenced: [String: String] = [:]
}

/// How the recorder treats the events it creates.
public struct RecordOptions: Sendable {
    /// Route events to sinks (outbox rows). `check` without `--deliver` records events but routes none.
    public var router: Router?
    /// Roll the transaction back: compute everything, change nothing (`check --dry-run`).
    public var dryRun = false
    /// Whether the poll counts for the source's schedule and health (not for a poll on request
    /// while the daemon owns the state).
    package var accounting = PollAccounting.counted
    /// The daemon's view of the host: a counted poll that fails while polls are paused
    /// (network offline, going to sleep) is not counted (``PollRunner``). Nil: always counted.
    package var host: SharedHostConditions?
    /// Whether this poll sends `repeat_interval` reminders: one that routes, is kept, and counts
    /// for the schedule (the daemon's polls, `check --deliver` without a daemon).
    var remindsOfItems: Bool { router != nil && !dryRun && accounting == .counted }
    /// The caller tells of each failed poll itself (`tidings check`: one line per failure on
    /// stderr), so the runner logs none. A one-shot caller has no next try to announce; what
    /// a failure leaves in the state for later polls (rejected credentials, a server's
    /// Retry-After) is said in the outcome's error instead.
    package var callerReportsFailures = false
    /// Where daemons share the state: this instance's id. The poll is recorded only while it
    /// holds the source's lease (a poll that outlived its lease changes nothing).
    package var fence: String?
    var transaction: TransactionKind { dryRun ? .dryRun : .write }
    public init(router: Router?, dryRun: Bool = false) {
        self.router = router
        self.dryRun = dryRun
    }
}

/// Writes one poll's outcome — items, source status, events and outbox rows — in ONE
/// transaction. A crash at any point leaves either all of it or none of it.
public struct PollRecorder: Sendable {
    public let store: StateStore

    public init(store: StateStore) { self.store = store }

    /// Records a successful poll and returns the events it produced. `nextDue`, when given, is
    /// stored in the same transaction (one commit per poll).
    public func recordSuccess(_ source: SourceConfig, result: PollResult, now: Date, options: RecordOptions, nextDue: Date? = nil) throws -> PollRecord {
        try store.database.transaction(options.transaction) { try Self.success($0, source, result: result, now: now, options: options, nextDue: nextDue) }
    }

    /// ``recordSuccess(_:result:now:options:nextDue:)`` from async code: the transaction runs on
    /// the state backend's threads, not the cooperative pool.
    public func recordSuccess(_ source: SourceConfig, result: PollResult, now: Date, options: RecordOptions, nextDue: Date? = nil) async throws -> PollRecord {
        try await store.database.perform(options.transaction) { try Self.success($0, source, result: result, now: now, options: options, nextDue: nextDue) }
    }

    static func success(_ db: any SQLConnection, _ source: SourceConfig, result: PollResult, now: Date, options: RecordOptions, nextDue: Date?) throws -> PollRecord {
        do {
            var record = PollRecord()
            let status = try SourceRow.fetch(db, source: source, fence: options.fence)
            var events: [Event] = []
            if let (items, validators, renumbered) = result.items {
                let intake = ItemIntake.take(items)
                let complete = source.instance.snapshotIsComplete
                let previous = try Self.items(db, source: source.name, includingGone: !complete)
                let baseline = status.baselineAt == nil || renumbered
                let outcome = Deduplicator(flapWindow: source.flapWindow, reportsRemovals: complete)
                    .run(previous: previous, current: intake.items, baseline: baseline, notifyExisting: source.settings.notifyExisting, now: now)
                try Self.write(db, source: source.name, upserts: outcome.upserts)
                try Reminders.forget(db, source: source.name, upserts: outcome.upserts)
                if baseline { record.baselineCount = outcome.baselineCount }
                if let cut = Self.cutWarning(intake, stored: outcome.upserts) { record.warnings.append(cut) }
                func event(_ change: Deduplicator.Change) -> Event {
                    EventFactory.event(source: source, change: change, firstSeen: previous[change.item.key]?.firstSeen ?? now, now: now)
                }
                if outcome.changes.count <= source.settings.maxEvents {
                    events = outcome.changes.map(event)
                    try NoticeBook.record(db, source: source.name, changes: outcome.changes, events: events, ttl: source.settings.noticeTTL, now: now)
                } else {
                    // Over max_events: the state is recorded in full (the next poll is normal),
                    // but one summary event goes out instead of the flood.
                    let summary = EventFactory.summary(source: source, changes: outcome.changes, now: now)
                    events = [summary]
                    record.warnings.append("\(summary.title); recorded the state and sent one summary event instead")
                    let notices = outcome.changes.filter { $0.item.kind == NoticeBook.kind }
                    try NoticeBook.record(db, source: source.name, changes: notices, events: notices.map(event), ttl: source.settings.noticeTTL, now: now)
                }
                try db.execute("UPDATE source_state SET etag = ?, last_modified = ?, baseline_at = COALESCE(baseline_at, ?) WHERE source = ?",
                               validators.etag, validators.lastModified, now, source.name)
            }
            // The remote's minimum interval: no poll before `now + minimum` (none: the old one lapses).
            let minimum = result.minimumInterval
            let paced = minimum.map { now.addingTimeInterval($0) }
            switch options.accounting {
            case .counted:
                if status.errorReported {
                    events.append(EventFactory.health(source: source, type: .recovered, message: "recovered after \(status.failures) failed polls", failures: status.failures, now: now))
                }
                try db.execute("""
                    UPDATE source_state SET last_poll = ?, last_success = ?, failures = 0, error_reported = 0,
                      auth_failed_hash = NULL, next_due = COALESCE(?, next_due), not_before = ?, min_interval = ? WHERE source = ?
                    """, now, now, nextDue, paced, minimum, source.name)
            case .uncounted:
                try db.execute("UPDATE source_state SET last_poll = ?, last_success = ?, not_before = COALESCE(?, not_before), min_interval = ? WHERE source = ?",
                               now, now, paced, minimum, source.name)
            }
            var through: [String: Set<String>] = [:]
            if let router = options.router, options.remindsOfItems {
                let reminders = try Reminders.batch(db, source: source, router: router, now: now)
                events += reminders.events
                through = reminders.through
                if let warning = reminders.warning { record.warnings.append(warning) }
            }
            record.events = try Self.insert(db, events: events, options: options, now: now, through: through, silenced: &record.silenced)
            return record
        }
    }

    /// Records a failed poll: counts it, and emits one `error` event when the threshold is
    /// reached (or at once for rejected credentials). Never one event per failed poll.
    /// `nextDue`, given the consecutive failures, is stored in the same transaction, and with
    /// it `notBefore`, the earliest time the server allowed (its `Retry-After`).
    public func recordFailure(
        _ source: SourceConfig, error: PollError, now: Date, options: RecordOptions, notBefore: Date? = nil,
        nextDue: (Int) -> Date? = { _ in nil }
    ) throws -> PollRecord {
        try store.database.transaction(options.transaction) {
            try Self.failure($0, source, error: error, now: now, options: options, notBefore: notBefore, nextDue: nextDue)
        }
    }

    /// ``recordFailure(_:error:now:options:notBefore:nextDue:)`` from async code, off the cooperative pool.
    public func recordFailure(
        _ source: SourceConfig, error: PollError, now: Date, options: RecordOptions, notBefore: Date? = nil,
        nextDue: @escaping @Sendable (Int) -> Date? = { _ in nil }
    ) async throws -> PollRecord {
        try await store.database.perform(options.transaction) {
            try Self.failure($0, source, error: error, now: now, options: options, notBefore: notBefore, nextDue: nextDue)
        }
    }

    static func failure(
        _ db: any SQLConnection, _ source: SourceConfig, error: PollError, now: Date, options: RecordOptions, notBefore: Date?,
        nextDue: (Int) -> Date?
    ) throws -> PollRecord {
        do {
            var record = PollRecord()
            let status = try SourceRow.fetch(db, source: source, fence: options.fence)
            let failures = status.failures + 1
            record.failures = failures
            var events: [Event] = []
            let isAuth = error.category == .auth
            if !status.errorReported && (isAuth || failures >= source.settings.errorThreshold) {
                let what = isAuth ? "credentials rejected: \(error.message)" : "\(failures) failed polls in a row, last: \(error.message)"
                events.append(EventFactory.health(source: source, type: .error, message: what, failures: failures, now: now, auth: isAuth))
            }
            record.authFailed = isAuth
            try db.execute("""
                UPDATE source_state SET last_poll = ?, last_error = ?, last_error_at = ?, failures = ?,
                  error_reported = ?, auth_failed_hash = ?, next_due = COALESCE(?, next_due), not_before = ? WHERE source = ?
                """, now, error.message, now, failures, status.errorReported || !events.isEmpty, isAuth ? source.configHash : nil,
                nextDue(failures), notBefore, source.name)
            record.events = try Self.insert(db, events: events, options: options, now: now, silenced: &record.silenced)
            return record
        }
    }

    /// Stores when the scheduler will poll the source next (survives restarts).
    public func setNextDue(_ source: String, provider: String, at date: Date) async throws {
        try await store.database.write { db in
            try SourceRow.ensure(db, source: source, provider: provider)
            try db.execute("UPDATE source_state SET next_due = ? WHERE source = ?", date, source)
        }
    }

    /// One line naming the items cut to size, if this poll stored any of them (an unchanged
    /// item that is cut the same way on every poll is not reported again).
    static func cutWarning(_ intake: ItemIntake.Result, stored: [StoredItem]) -> String? {
        let keys = stored.lazy.map(\.key).filter { intake.cut[$0] != nil }
        guard let first = keys.first else { return nil }
        let n = keys.count
        return "cut \(n) item\(n == 1 ? "" : "s") to size (key '\(first.prefix(80))': \(intake.cut[first]!.joined(separator: ", "))); "
            + "the stored item and its events carry a visible marker"
    }

    // MARK: rows

    /// The source's present and missing items. `gone` rows (removal reported) are left out:
    /// de-duplication treats a gone item that returns exactly like one never seen (`new`,
    /// first seen now), and they pile up between prunes.
    /// The stored items of `source`, without those gone unless `includingGone` (a window's
    /// items that left it: the Deduplicator must know them when they come back).
    static func items(_ db: any SQLConnection, source: String, includingGone: Bool = false) throws -> [String: StoredItem] {
        var out: [String: StoredItem] = [:]
        let rows = try db.fetchAll("SELECT key, kind, fingerprint, content_hash, state, first_seen, changed_at, missing_since, snapshot FROM item WHERE source = ?"
                                   + (includingGone ? "" : " AND state <> \(StoredItem.State.gone.sql)"), source)
        out.reserveCapacity(rows.count)
        for r in rows {
            let key: String = try r[0]
            out[key] = StoredItem(
                key: key, kind: try r[1], fingerprint: try r[2], contentHash: try r[3], state: StoredItem.State(rawValue: try r[4]) ?? .present,
                firstSeen: try r[5], changedAt: try r[6], missingSince: try r[7], snapshot: try r[8])
        }
        return out
    }

    static func write(_ db: any SQLConnection, source: String, upserts: [StoredItem]) throws {
        guard !upserts.isEmpty else { return }
        let sql = """
            INSERT INTO item(source, key, kind, fingerprint, content_hash, state, first_seen, changed_at, missing_since, snapshot)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(source, key) DO UPDATE SET kind = excluded.kind, fingerprint = excluded.fingerprint,
              content_hash = excluded.content_hash, state = excluded.state, first_seen = excluded.first_seen,
              changed_at = excluded.changed_at, missing_since = excluded.missing_since, snapshot = excluded.snapshot
            """
        try db.executeMany(sql, upserts.map { u in
            [source.sqlValue, u.key.sqlValue, u.kind.sqlValue, u.fingerprint.sqlValue, (u.contentHash == u.fingerprint ? nil : u.contentHash).sqlValue,
             u.state.rawValue.sqlValue, u.firstSeen.sqlValue, u.changedAt.sqlValue, u.missingSince.sqlValue, u.snapshotJSON.sqlValue]
        })
    }

    /// Inserts events and, when routing, one outbox row per (event, sink): sent as soon as the
    /// worker gets to it, or held for a route's quiet hours or `group_wait` (``HeldPlacement``).
    /// `through`: event id → the only routes that event goes through (reminders). An event that
    /// an active silence matches is inserted (history) but not routed; it is added to
    /// `silenced`. Returns the events.
    static func insert(_ db: any SQLConnection, events: [Event], options: RecordOptions, now: Date, through: [String: Set<String>] = [:],
                       silenced: inout [String: String]) throws -> [Event] {
        guard !events.isEmpty else { return events }
        let batch = EventID.make(at: now)
        let silences = try SilenceStore.active(db, at: now)
        let insertEvent = "INSERT INTO event(id, source, kind, type, key, observed_at, payload, silenced_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq"
        for e in events {
            let silence = silences.first { $0.matches(e) }
            guard let seq: Int64 = try db.scalar(insertEvent, [e.id.sqlValue, e.source.sqlValue, e.kind.sqlValue, e.event.rawValue.sqlValue, e.key.sqlValue, e.observedAt.sqlValue,
                                                                 e.jsonLine().sqlValue, silence?.id.sqlValue ?? .null]) else {
                throw SQLDecodingError(column: 0, value: .null, expected: "event seq")
            }
            if let silence {
                try SilenceStore.countSilenced(db, id: silence.id)
                silenced[e.id] = silence.id
                continue
            }
            guard let router = options.router else { continue }
            try Enqueue.deliveries(db, eventSeq: seq, router.decisions(for: e, at: now, through: through[e.id]), batch: batch, now: now)
        }
        return events
    }
}

/// The `source_state` row.
struct SourceRow {
    var failures: Int
    var errorReported: Bool
    var baselineAt: Double?

    static func ensure(_ db: any SQLConnection, source: String, provider: String) throws {
        try db.execute("INSERT INTO source_state(source, provider) VALUES (?, ?) ON CONFLICT(source) DO UPDATE SET provider = excluded.provider",
                       source, provider)
    }

    /// The row, locked until the poll's transaction ends where several daemons share the state.
    /// `fence`: the instance that must hold the source's lease (``LeaseBook``), else
    /// ``LeaseLost`` and nothing is recorded.
    static func fetch(_ db: any SQLConnection, source: SourceConfig, fence: String? = nil) throws -> SourceRow {
        if let fence { try LeaseBook.check(db, name: LeaseBook.sourceLease(source.name), owner: fence) }
        try ensure(db, source: source.name, provider: source.provider)
        guard let r = try db.fetchOne("SELECT failures, error_reported, baseline_at FROM source_state WHERE source = ?" + db.dialect.forUpdate, source.name) else {
            throw SQLDecodingError(column: 0, value: .null, expected: "source_state row")
        }
        return SourceRow(failures: try r[0], errorReported: try r[1], baselineAt: try r[2])
    }
}
