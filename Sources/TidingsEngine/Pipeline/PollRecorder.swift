import FoundationEssentials
import Logging
import TidingsPluginAPI

/// What one recorded poll produced.
package struct PollRecord: Sendable {
    package var events: [Event] = []
    /// Non-nil when this poll was the silent baseline: how many items it stored.
    package var baselineCount: Int?
    /// Consecutive failures after this poll (0 on success).
    package var failures = 0
    /// What the poll had to cut or hold back (items cut to size, events over `max_events`):
    /// one line each, for the log.
    package var warnings: [String] = []
    /// The events a silence kept from their sinks: event id → silence id.
    package var silenced: [String: String] = [:]
    /// The source's health as this poll left it in the state (``SourceHealth``).
    package var health = SourceHealth.new
}

/// How the recorder treats the events it creates.
package struct RecordOptions: Sendable {
    /// Route events to sinks (outbox rows). `check` without `--deliver` records events but routes none.
    package var router: Router?
    /// Roll the transaction back: compute everything, change nothing (`check --dry-run`).
    package var dryRun = false
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
    package init(router: Router?, dryRun: Bool = false) {
        self.router = router
        self.dryRun = dryRun
    }
}

/// Records one poll — items, source status, events and outbox rows — in ONE transaction,
/// through the stages of ``PollPipeline``. A crash at any point leaves either all of it or none of it.
/// (From async code, polls that finish together share that transaction, each in a savepoint:
/// group commit, ``GroupCommit``. All of a poll or none of it, still.)
package struct PollRecorder: Sendable {
    package let store: StateStore

    package init(store: StateStore) { self.store = store }

    /// What the poll knows of its source's `source_state` row when it is recorded.
    package enum Prior: Sendable {
        /// Nothing: the transaction reads it (and locks it where the state is shared).
        case unread
        /// Read at the poll's start (nil: no row yet); the write checks it still holds.
        case read(SourceState?)
    }

    /// Records a successful poll and returns the events it produced. `nextDue`, when given, is
    /// stored in the same transaction (one commit per poll).
    package func recordSuccess(_ source: SourceConfig, result: PollResult, now: Date, options: RecordOptions, nextDue: Date? = nil) throws -> PollRecord {
        try record(source, .success(result, nextDue: nextDue), now: now, options: options)
    }

    /// ``recordSuccess(_:result:now:options:nextDue:)`` from async code: the transaction runs on
    /// the state backend's threads, not the cooperative pool.
    package func recordSuccess(_ source: SourceConfig, result: PollResult, now: Date, options: RecordOptions, nextDue: Date? = nil) async throws -> PollRecord {
        try await record(source, .success(result, nextDue: nextDue), now: now, options: options, prior: .unread)
    }

    /// Records a failed poll: counts it, and emits one `error` event when the threshold is
    /// reached (or at once for rejected credentials). Never one event per failed poll.
    /// `nextDue`, given the consecutive failures, is stored in the same transaction, and with
    /// it `notBefore`, the earliest time the server allowed (its `Retry-After`).
    package func recordFailure(
        _ source: SourceConfig, error: PollError, now: Date, options: RecordOptions, notBefore: Date? = nil,
        nextDue: @escaping @Sendable (Int) -> Date? = { _ in nil }
    ) throws -> PollRecord {
        try record(source, .failure(error, notBefore: notBefore, nextDue: nextDue), now: now, options: options)
    }

    /// ``recordFailure(_:error:now:options:notBefore:nextDue:)`` from async code, off the cooperative pool.
    package func recordFailure(
        _ source: SourceConfig, error: PollError, now: Date, options: RecordOptions, notBefore: Date? = nil,
        nextDue: @escaping @Sendable (Int) -> Date? = { _ in nil }
    ) async throws -> PollRecord {
        try await record(source, .failure(error, notBefore: notBefore, nextDue: nextDue), now: now, options: options, prior: .unread)
    }

    func record(_ source: SourceConfig, _ answer: PollRecording.Answer, now: Date, options: RecordOptions) throws -> PollRecord {
        do {
            return try store.database.transaction(options.transaction) { try Self.record($0, source, answer, now: now, options: options, prior: .unread) }
        } catch is SourceState.Moved {
            return try store.database.transaction(options.transaction) { try Self.record($0, source, answer, now: now, options: options, prior: .unread) }
        }
    }

    /// From async code, with the row as the poll read it at its start (or not): written if it
    /// still holds, else the poll is recorded once more from the row as it is now
    /// (``SourceState/Moved``: the row changed, or another instance made it meanwhile).
    ///
    /// A poll that counts is committed with the polls that finish beside it (group commit,
    /// ``StateDatabase/performGrouped(order:_:)``): in a savepoint of their one transaction, so
    /// that a poll whose recording throws fails alone; this returns after the COMMIT that holds
    /// it. A dry run rolls back alone, as before.
    func record(_ source: SourceConfig, _ answer: PollRecording.Answer, now: Date, options: RecordOptions, prior: Prior) async throws -> PollRecord {
        let database = store.database
        func attempt(_ prior: Prior) async throws -> PollRecord {
            let body: @Sendable (any SQLConnection) throws -> PollRecord = { try Self.record($0, source, answer, now: now, options: options, prior: prior) }
            if options.transaction == .write { return try await database.performGrouped(order: source.name, body) }
            return try await database.perform(options.transaction, body)
        }
        do {
            return try await attempt(prior)
        } catch is SourceState.Moved {
            return try await attempt(.unread)
        }
    }

    /// One poll's transaction: the lease (where daemons share the state, the poll is recorded
    /// only while this instance holds the source's lease, else ``LeaseLost``), the row, the pipeline.
    static func record(
        _ db: any SQLConnection, _ source: SourceConfig, _ answer: PollRecording.Answer, now: Date, options: RecordOptions,
        prior: Prior
    ) throws -> PollRecord {
        if let fence = options.fence { try LeaseBook.check(db, name: LeaseBook.sourceLease(source.name), owner: fence) }
        let read: SourceState?
        switch prior {
        case .unread: read = try SourceState.read(db, source: source.name, locking: true)
        case .read(let state): read = state
        }
        var ctx = PollRecording(source: source, answer: answer, now: now, options: options, read: read)
        try PollPipeline.build(options).run(&ctx, db)
        return ctx.record
    }

    /// No request to `source` before `date`: the Retry-After a poll that is not recorded
    /// (one on request) received.
    package func setNotBefore(_ source: String, provider: String, at date: Date) async throws {
        try await store.database.write { db in
            try db.execute(
                """
                INSERT INTO source_state(source, provider, not_before) VALUES (?, ?, ?)
                ON CONFLICT(source) DO UPDATE SET provider = excluded.provider, not_before = excluded.not_before
                """, source, provider, date)
        }
    }

    /// Stores when the scheduler will poll the source next (survives restarts).
    package func setNextDue(_ source: String, provider: String, at date: Date) async throws {
        try await store.database.write { db in
            try db.execute(
                """
                INSERT INTO source_state(source, provider, next_due) VALUES (?, ?, ?)
                ON CONFLICT(source) DO UPDATE SET provider = excluded.provider, next_due = excluded.next_due
                """, source, provider, date)
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
        let rows = try db.fetchAll(
            "SELECT key, kind, fingerprint, content_hash, state, first_seen, changed_at, missing_since, snapshot FROM item WHERE source = ?"
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
        try db.executeMany(
            sql,
            upserts.map { u in
                [
                    source.sqlValue, u.key.sqlValue, u.kind.sqlValue, u.fingerprint.sqlValue, (u.contentHash == u.fingerprint ? nil : u.contentHash).sqlValue,
                    u.state.rawValue.sqlValue, u.firstSeen.sqlValue, u.changedAt.sqlValue, u.missingSince.sqlValue, u.snapshotJSON.sqlValue,
                ]
            })
    }
}
