import FoundationEssentials
import TidingsPluginAPI

/// A source's health and schedule as stored (for `tidings sources`).
package struct SourceStatus: Sendable {
    package var source: String
    package var lastSuccess: Date?
    package var lastError: String?
    package var lastErrorAt: Date?
    package var failures: Int
    package var nextDue: Date?
    package var authFailedHash: String?
    package var baselineDone: Bool
    package var items: Int
    /// Where daemons share the state: the instance polling it now ("HOST:PID"), if any.
    package var owner: String?
    /// The remote's own minimum interval between polls (``PollResult/minimumInterval``), if one applies.
    package var minInterval: TimeInterval?
}

/// What the daemon's status line and health gauges read of each source: see ``StateStore/storedHealth()``.
package struct StoredHealth: Sendable, Equatable, StoredHealthFields {
    package var failures: Int
    package var lastSuccess: Date?
    package var authFailedHash: String?
}

extension StateStore {
    /// `countingItems`: false leaves every ``SourceStatus/items`` 0 and skips counting them (a
    /// pass over every stored item, the dearest part where sources keep many).
    package func statuses(countingItems: Bool = true) throws -> [String: SourceStatus] {
        try database.read { db in
            let counts =
                countingItems
                ? Dictionary(
                    uniqueKeysWithValues: try db.fetchAll("SELECT source, count(*) FROM item WHERE state != \(StoredItem.State.gone.sql) GROUP BY source").map {
                        (try $0[0] as String, try $0[1] as Int)
                    }) : [:]
            let owners = database.isShared ? try LeaseBook.sourceOwners(db, now: Date()) : [:]
            let rows = try db.fetchAll(
                "SELECT source, last_success, last_error, last_error_at, failures, next_due, auth_failed_hash, baseline_at, min_interval FROM source_state")
            var out: [String: SourceStatus] = [:]
            out.reserveCapacity(rows.count)  // growing it rehashed every name several times
            for r in rows {
                let name: String = try r[0]
                out[name] = SourceStatus(
                    source: name, lastSuccess: try r[1], lastError: try r[2], lastErrorAt: try r[3], failures: try r[4],
                    nextDue: try r[5], authFailedHash: try r[6], baselineDone: (try r[7] as Double?) != nil, items: counts[name] ?? 0,
                    owner: owners[name], minInterval: try r[8])
            }
            return out
        }
    }

    /// The sources whose stored state holds an auth-failed hash (see ``TidingsConfig/completeConfigHashes(for:)``).
    package func authFailedSources() throws -> Set<String> {
        try database.read { db in
            Set(try db.fetchAll("SELECT source FROM source_state WHERE auth_failed_hash IS NOT NULL").map { try $0[0] as String })
        }
    }

    /// What each stored source's health is derived from (``SourceHealth``): what the daemon's
    /// status line and health metrics start from (cheaper than ``statuses()``, which counts items too).
    package func storedHealth() throws -> [String: StoredHealth] {
        try database.read { try Self.storedHealth($0) }
    }

    ///
    /// `problemsOnly`: only the rows under which a source can be failing (failures, or an
    /// auth-failed hash; ``SourceHealth/isFailing``), which is all the status line counts: a source
    /// absent from the result is not failing. Issue 33: the daemon's status pass every 5 s read
    /// every row (100,000 on a shared state), tens of MB each time in whichever thread's malloc
    /// arena ran it; benchmark 8's daemons held 350 MiB for 140 of configuration.
    package static func storedHealth(_ db: any SQLConnection, problemsOnly: Bool = false) throws -> [String: StoredHealth] {
        var out: [String: StoredHealth] = [:]
        let problems = problemsOnly ? " WHERE failures > 0 OR auth_failed_hash IS NOT NULL" : ""
        for r in try db.fetchAll("SELECT source, failures, last_success, auth_failed_hash FROM source_state\(problems)") {
            out[try r[0]] = StoredHealth(failures: try r[1], lastSuccess: try r[2], authFailedHash: try r[3])
        }
        return out
    }

    /// The rows of ``storedHealth(_:problemsOnly:)`` a page at a time: at most `limit`, after the
    /// source `after` (nil: from the first) in the state's order of names. Issue 33: all 100,000
    /// rows of a shared state, with their dictionary, were 45 MB at once when a daemon started.
    package static func storedHealth(_ db: any SQLConnection, after: String?, limit: Int) throws -> [(String, StoredHealth)] {
        let columns = "SELECT source, failures, last_success, auth_failed_hash FROM source_state"
        let rows =
            try after.map { try db.fetchAll("\(columns) WHERE source > ? ORDER BY source LIMIT ?", [$0.sqlValue, limit.sqlValue]) }
            ?? db.fetchAll("\(columns) ORDER BY source LIMIT ?", [limit.sqlValue])
        return try rows.map { r in (try r[0], StoredHealth(failures: try r[1], lastSuccess: try r[2], authFailedHash: try r[3])) }
    }

    /// One row of `tidings history`: an event, or a stored row that cannot be read back (written
    /// by an older version), shown with the reason instead of being hidden.
    package enum HistoryEntry: Sendable {
        /// An event; `silencedBy` is the id of the silence that kept it from its sinks.
        case event(Event, silencedBy: String?)
        case unreadable(id: String, source: String, reason: String)
    }

    /// Recent events, newest last.
    package func history(source: String?, limit: Int) throws -> [HistoryEntry] {
        try database.read { db in
            let sql = "SELECT id, source, payload, silenced_by FROM event \(source == nil ? "" : "WHERE source = ? ")ORDER BY seq DESC LIMIT ?"
            let arguments: [SQLValue] = (source.map { [$0.sqlValue] } ?? []) + [limit.sqlValue]
            return try db.fetchAll(sql, arguments).reversed().map { r in
                do { return .event(try Event.decode(jsonLine: try r[2] as String), silencedBy: try r[3]) } catch {
                    return .unreadable(id: try r[0], source: try r[1], reason: "\(error)")
                }
            }
        }
    }

    /// The readable events of ``history(source:limit:)``.
    package func historyEvents(source: String?, limit: Int) throws -> [Event] {
        try history(source: source, limit: limit).compactMap { if case .event(let e, _) = $0 { return e } else { return nil } }
    }

    /// Drops a source's items, status and notices: its next poll is a silent baseline. History stays.
    @discardableResult
    package func forget(source: String) throws -> Int {
        try database.write { db in
            let items = try db.execute("DELETE FROM item WHERE source = ?", source)
            try db.execute("DELETE FROM source_state WHERE source = ?", source)
            try db.execute("DELETE FROM notice WHERE source = ?", source)
            try db.execute("DELETE FROM reminder WHERE source = ?", source)
            return items
        }
    }

    /// What one prune removed.
    package struct Pruned: Sendable, Equatable {
        /// Events older than `history_days` that no delivery needed any more.
        package var events = 0
        /// Items gone longer than `history_days`.
        package var items = 0
        /// Dead letters older than `dead_letter_days`, by sink.
        package var deadLetters: [String: Int] = [:]
    }

    /// Deletes dead letters older than `deadLetterDays` (nil: none), then events older than
    /// `days` that no delivery still needs (the dead letters' events among them), and long-gone
    /// items.
    @discardableResult
    package func prune(olderThanDays days: Int, deadLetterDays: Int? = nil, now: Date = Date()) throws -> Pruned {
        try database.write { try Self.prune($0, olderThanDays: days, deadLetterDays: deadLetterDays, now: now) }
    }

    /// The daemon's hourly prune, off the cooperative pool.
    package func pruneInBackground(olderThanDays days: Int, deadLetterDays: Int?, now: Date = Date()) async throws -> Pruned {
        try await database.write { try Self.prune($0, olderThanDays: days, deadLetterDays: deadLetterDays, now: now) }
    }

    static func prune(_ db: any SQLConnection, olderThanDays days: Int, deadLetterDays: Int?, now: Date) throws -> Pruned {
        let cutoff = now.addingTimeInterval(-Double(days) * 86_400)
        var pruned = Pruned()
        do {
            // A dead letter is never tried again unless someone requeues it: after
            // `dead_letter_days` it goes, so a sink that fails for good does not grow the state
            // without bound. Its age counts from when it was queued (or requeued).
            if let deadLetterDays {
                let deadCutoff = now.addingTimeInterval(-Double(deadLetterDays) * 86_400)
                for r in try db.fetchAll(
                    "SELECT sink, count(*) FROM delivery WHERE status = \(DeliveryStatus.dead.sql) AND created_at < ? GROUP BY sink", deadCutoff)
                {
                    pruned.deadLetters[try r[0]] = try r[1]
                }
                if !pruned.deadLetters.isEmpty {
                    try db.execute("DELETE FROM delivery WHERE status = \(DeliveryStatus.dead.sql) AND created_at < ?", deadCutoff)
                }
            }
            pruned.events = try db.execute("DELETE FROM event WHERE observed_at < ? AND seq NOT IN (SELECT event_seq FROM delivery)", cutoff)
            pruned.items = try db.execute("DELETE FROM item WHERE state = \(StoredItem.State.gone.sql) AND changed_at < ?", cutoff)
            // Notices that ended, were dismissed or expired long ago are no longer pending anywhere.
            try db.execute(
                """
                DELETE FROM notice WHERE updated_at < ?
                  AND (ended_at IS NOT NULL OR dismissed_at IS NOT NULL OR expires_at < ?)
                """, cutoff, cutoff)
            // Silences that ended long ago (history keeps the ids of the events they held back).
            try db.execute("DELETE FROM silence WHERE ends_at < ?", cutoff)
            return pruned
        }
    }
}
