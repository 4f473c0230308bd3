import FoundationEssentials
import TidingsPluginAPI

/// A source's `source_state` row: what a poll reads once at its start (before the provider
/// call: validators, a rejected configuration, the remote's pacing) and writes once at its end
/// (in the poll's transaction, ``SourceStateStage``).
package struct SourceState: Sendable, Equatable {
    package var provider: String
    package var etag: String?
    package var lastModified: String?
    package var baselineAt: Date?
    package var lastPoll: Date?
    package var lastSuccess: Date?
    package var lastError: String?
    package var lastErrorAt: Date?
    /// Failed polls in a row (0: the last counted poll succeeded).
    package var failures = 0
    /// The `error` event of the current run of failures went out.
    package var errorReported = false
    /// The configuration hash under which the credentials were rejected.
    package var authFailedHash: String?
    package var nextDue: Date?
    /// The earliest time the server allowed (its Retry-After, or its minimum interval after the last poll).
    package var notBefore: Date?
    /// The remote's own minimum interval between polls (``PollResult/minimumInterval``).
    package var minInterval: TimeInterval?

    package init(provider: String) { self.provider = provider }

    /// The columns, in the order of ``columns``: one list for the read and the write.
    private static let names = [
        "provider", "etag", "last_modified", "baseline_at", "last_poll", "last_success", "last_error", "last_error_at",
        "failures", "error_reported", "auth_failed_hash", "next_due", "not_before", "min_interval",
    ]

    private var columns: [SQLValue] {
        [
            provider.sqlValue, etag.sqlValue, lastModified.sqlValue, baselineAt.sqlValue, lastPoll.sqlValue, lastSuccess.sqlValue,
            lastError.sqlValue, lastErrorAt.sqlValue, failures.sqlValue, errorReported.sqlValue, authFailedHash.sqlValue,
            nextDue.sqlValue, notBefore.sqlValue, minInterval.sqlValue,
        ]
    }

    /// The columns of ``names`` from `r`'s column `k` on.
    private init(row r: SQLRow, from k: Int = 0) throws {
        provider = try r[k]
        etag = try r[k + 1]
        lastModified = try r[k + 2]
        baselineAt = try r[k + 3]
        lastPoll = try r[k + 4]
        lastSuccess = try r[k + 5]
        lastError = try r[k + 6]
        lastErrorAt = try r[k + 7]
        failures = try r[k + 8]
        errorReported = try r[k + 9]
        authFailedHash = try r[k + 10]
        nextDue = try r[k + 11]
        notBefore = try r[k + 12]
        minInterval = try r[k + 13]
    }

    /// The row of `source`; nil before its first poll. `locking`: where several daemons share
    /// the state, the row stays locked until the transaction ends.
    package static func read(_ db: any SQLConnection, source: String, locking: Bool = false) throws -> SourceState? {
        let sql = "SELECT \(names.joined(separator: ", ")) FROM source_state WHERE source = ?" + (locking ? db.dialect.forUpdate : "")
        return try db.fetchOne(sql, source).map { try SourceState(row: $0) }
    }

    /// The rows of `sources` (those that have one), by source, ``SQL/listChunk`` to a statement (``SourceStates``).
    static func read(_ db: any SQLConnection, sources: [String]) throws -> [String: SourceState] {
        var rows: [String: SourceState] = [:]
        rows.reserveCapacity(sources.count)
        for names in SQL.chunks(sources) {
            let sql = "SELECT source, \(Self.names.joined(separator: ", ")) FROM source_state WHERE source IN (\(SQL.placeholders(names.count)))"
            for r in try db.fetchAll(sql, names.map(\.sqlValue)) {
                rows[try r[0]] = try SourceState(row: r, from: 1)
            }
        }
        return rows
    }

    /// The row changed (or appeared, or went) between a poll's read and its write: the poll's
    /// transaction is rolled back and recorded again from a fresh read (``PollRecorder``).
    struct Moved: Error {}

    /// Writes this poll's row in one statement: the columns that differ from `read` (and
    /// `last_poll`, which every recorded poll sets), only if the row is still the one read (no
    /// poll recorded since: the same `last_poll`; the same failures, reported error and
    /// baseline), else ``Moved``. No row read: one INSERT, which must not find one. (Where
    /// daemons share the state, a poll on request and the owner's poll of one source may
    /// overlap: the second to write finds the row moved and is recorded again, after the first.)
    func write(_ db: any SQLConnection, source: String, over read: SourceState?) throws {
        let new = columns
        guard let read else {
            let sql =
                "INSERT INTO source_state(source, \(Self.names.joined(separator: ", "))) VALUES (?, \(SQL.placeholders(new.count))) ON CONFLICT(source) DO NOTHING"
            guard try db.execute(sql, [source.sqlValue] + new) == 1 else { throw Moved() }
            return
        }
        let old = read.columns
        let changed = Self.names.indices.filter { new[$0] != old[$0] || Self.names[$0] == "last_poll" }
        let sql =
            "UPDATE source_state SET " + changed.map { "\(Self.names[$0]) = ?" }.joined(separator: ", ")
            + " WHERE source = ? AND COALESCE(last_poll, -1) = ? AND failures = ? AND error_reported = ? AND baseline_at IS \(read.baselineAt == nil ? "" : "NOT ")NULL"
        let guardValues = [source.sqlValue, (read.lastPoll?.timeIntervalSince1970 ?? -1).sqlValue, read.failures.sqlValue, read.errorReported.sqlValue]
        guard try db.execute(sql, changed.map { new[$0] } + guardValues) == 1 else { throw Moved() }
    }
}

/// The `source_state` rows of a state read in one transaction, for polls that would each read
/// their own row at their start (``PollRunner/poll(_:options:logger:known:)``): a `check` of
/// 200 sources makes one read instead of 200 (each a transaction, in WAL mode a read lock,
/// and the reader connections opened for them). A row that moves after this read is no harm:
/// a poll's write finds it moved and records again from a fresh read (``SourceState/Moved``).
package struct SourceStates: Sendable {
    private let rows: [String: SourceState]

    /// The rows of `sources`, in one read transaction.
    package static func read(_ store: StateStore, sources: [String]) async throws -> SourceStates {
        SourceStates(rows: try await store.database.read { try SourceState.read($0, sources: sources) })
    }

    /// The row of `source`; nil before its first poll.
    func state(of source: String) -> SourceState? { rows[source] }
}
