import FoundationEssentials
import TidingsPluginAPI

// The storage seam (DESIGN §11). Every statement tidings runs against its state goes through
// these two protocols: ``StateDatabase`` (where the state lives: a SQLite file, a PostgreSQL
// server) opens transactions, and ``SQLConnection`` runs statements inside one. The stores
// (``PollRecorder``, ``OutboxStore``, ``NoticeBook``, ``SilenceStore``, the CLI queries,
// ``LeaseBook``) are written once against them, in SQL that both SQLite and PostgreSQL accept;
// where the two differ, the statement asks ``SQLConnection/dialect``.
//
// Rules every implementation keeps:
// - Statements use `?` placeholders; an implementation that needs `$1` rewrites them.
// - Values are the four of ``SQLValue``: a Bool is stored as 0/1, a Date as seconds since 1970.
// - ``StateDatabase/transaction(_:_:)`` runs its body on the calling thread, as one
//   transaction (committed when the body returns, rolled back when it throws or for
//   ``TransactionKind/dryRun``). ``StateDatabase/perform(_:_:)`` does the same from async
//   code without blocking the cooperative thread pool: anything that can wait (a write
//   lock, the network) runs on the backend's own threads. (SQLite's WAL reads wait for
//   nobody and run in place.) ``StateDatabase/performGrouped(order:_:)`` is a poll's write:
//   the same, committed with the writes queued beside it (``GroupCommit``).

/// A value bound to a statement or read from a row.
package enum SQLValue: Sendable, Equatable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
}

/// A Swift value that can be bound to a statement and read back from a row.
package protocol SQLConvertible {
    var sqlValue: SQLValue { get }
    /// Nil when the stored value is not of this type (or is NULL for a non-optional).
    init?(sqlValue: SQLValue)
}

extension Int64: SQLConvertible {
    package var sqlValue: SQLValue { .integer(self) }
    package init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .integer(let i): self = i
        case .real(let d) where d.rounded() == d && abs(d) < 9e18: self = Int64(d)
        case .text(let t):
            guard let i = Int64(t) else { return nil }
            self = i
        default: return nil
        }
    }
}

extension Int: SQLConvertible {
    package var sqlValue: SQLValue { .integer(Int64(self)) }
    package init?(sqlValue: SQLValue) {
        guard let i = Int64(sqlValue: sqlValue) else { return nil }
        self = Int(i)
    }
}

extension Double: SQLConvertible {
    package var sqlValue: SQLValue { .real(self) }
    package init?(sqlValue: SQLValue) {
        switch sqlValue {
        case .real(let d): self = d
        case .integer(let i): self = Double(i)
        case .text(let t):
            guard let d = Double(t) else { return nil }
            self = d
        case .null: return nil
        }
    }
}

extension String: SQLConvertible {
    package var sqlValue: SQLValue { .text(self) }
    package init?(sqlValue: SQLValue) {
        guard case .text(let t) = sqlValue else { return nil }
        self = t
    }
}

extension Bool: SQLConvertible {
    package var sqlValue: SQLValue { .integer(self ? 1 : 0) }
    package init?(sqlValue: SQLValue) {
        guard let i = Int64(sqlValue: sqlValue) else { return nil }
        self = i != 0
    }
}

extension Date: SQLConvertible {
    package var sqlValue: SQLValue { .real(timeIntervalSince1970) }
    package init?(sqlValue: SQLValue) {
        guard let d = Double(sqlValue: sqlValue) else { return nil }
        self = Date(timeIntervalSince1970: d)
    }
}

extension Optional: SQLConvertible where Wrapped: SQLConvertible {
    package var sqlValue: SQLValue { self?.sqlValue ?? .null }
    package init?(sqlValue: SQLValue) {
        if sqlValue == .null {
            self = .none
            return
        }
        guard let w = Wrapped(sqlValue: sqlValue) else { return nil }
        self = .some(w)
    }
}

extension SQLValue: SQLConvertible {
    package var sqlValue: SQLValue { self }
    package init?(sqlValue: SQLValue) { self = sqlValue }
}

/// A stored value that is not what the schema says (a damaged or foreign database).
package struct SQLDecodingError: Error, CustomStringConvertible {
    package var column: Int
    package var value: SQLValue
    package var expected: String
    package var description: String { "column \(column) holds \(value), not a \(expected)" }
}

/// One row of a result, by column position (the order of the SELECT list).
package struct SQLRow: Sendable {
    package var values: [SQLValue]
    package init(_ values: [SQLValue]) { self.values = values }

    package subscript<T: SQLConvertible>(_ i: Int) -> T {
        get throws {
            let v = i < values.count ? values[i] : .null
            guard let t = T(sqlValue: v) else { throw SQLDecodingError(column: i, value: v, expected: "\(T.self)") }
            return t
        }
    }
}

/// Where SQLite and PostgreSQL differ in what a statement may say.
package enum SQLDialect: String, Sendable {
    case sqlite, postgres

    /// Appended to a SELECT that locks the rows it reads until the transaction ends (another
    /// instance's transaction on them waits). SQLite's one writer needs none.
    package var forUpdate: String { self == .postgres ? " FOR UPDATE" : "" }
    /// The same, skipping rows another transaction holds (lease and claim queries).
    package var forUpdateSkipLocked: String { self == .postgres ? " FOR UPDATE SKIP LOCKED" : "" }
}

/// Statements inside one transaction. Not Sendable: it lives for its transaction's body.
package protocol SQLConnection {
    var dialect: SQLDialect { get }
    /// Runs a statement; returns how many rows it changed.
    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int
    /// Runs a query and returns its rows.
    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow]
    /// Runs one statement once per argument list (a poll's item upserts): prepared once.
    func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws
    /// A step of a write's savepoint in a group commit (``GroupCommit``). A backend may defer
    /// `begin` and `release` to go out with the next statement.
    func savepoint(_ step: SavepointStep) throws
}

extension SQLConnection {
    package func savepoint(_ step: SavepointStep) throws { try execute(step.sql, []) }

    package func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
        for row in rows { try execute(sql, row) }
    }

    @discardableResult
    package func execute(_ sql: String, _ arguments: any SQLConvertible...) throws -> Int {
        try execute(sql, arguments.map(\.sqlValue))
    }

    package func fetchAll(_ sql: String, _ arguments: any SQLConvertible...) throws -> [SQLRow] {
        try fetchAll(sql, arguments.map(\.sqlValue))
    }

    package func fetchOne(_ sql: String, _ arguments: [SQLValue]) throws -> SQLRow? {
        try fetchAll(sql, arguments).first
    }

    package func fetchOne(_ sql: String, _ arguments: any SQLConvertible...) throws -> SQLRow? {
        try fetchAll(sql, arguments.map(\.sqlValue)).first
    }

    /// The first column of the first row, if any (and not NULL).
    package func scalar<T: SQLConvertible>(_ sql: String, _ arguments: [SQLValue] = []) throws -> T? {
        guard let row = try fetchAll(sql, arguments).first, let v = row.values.first, v != .null else { return nil }
        return try row[0] as T
    }
}

/// Helpers for writing statements.
package enum SQL {
    /// `?, ?, ?` for `n` values (an `IN (…)` list or a row of an `INSERT`).
    package static func placeholders(_ n: Int) -> String { Array(repeating: "?", count: n).joined(separator: ", ") }

    /// How many values an `IN (…)` list takes at most: a statement's parameters are bounded
    /// (SQLite: 32,766; PostgreSQL: 65,535), and 500 keep each statement small.
    package static let listChunk = 500

    /// `items` in parts of at most ``listChunk``, in order.
    package static func chunks<C: RandomAccessCollection>(_ items: C) -> [C.SubSequence] {
        stride(from: 0, to: items.count, by: listChunk).map { start in
            let from = items.index(items.startIndex, offsetBy: start)
            return items[from..<items.index(from, offsetBy: min(listChunk, items.count - start))]
        }
    }
}

/// What a transaction may do.
package enum TransactionKind: Sendable {
    /// Reads only (a consistent snapshot where the backend has one).
    case read
    /// Reads and writes, committed when the body returns.
    case write
    /// Reads and writes, always rolled back (`tidings check --dry-run`).
    case dryRun
}

/// Where the state lives. One per process, shared by everything that reads or writes state.
package protocol StateDatabase: Sendable {
    /// For messages: the SQLite file's path, or the PostgreSQL URL without its password.
    var location: String { get }
    var dialect: SQLDialect { get }
    /// Whether several daemons may share this state (sources and sinks are then leased).
    var isShared: Bool { get }
    /// Runs `body` as one transaction on the calling thread (the CLI, tests).
    @discardableResult
    func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T
    /// Runs `body` as one transaction from async code (the daemon's pipeline) without
    /// blocking the cooperative pool: on the backend's own threads wherever it could wait.
    @discardableResult
    func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T
    /// A write transaction's body from async code, committed with the writes that reach the
    /// backend's writer while it is busy (group commit, ``GroupCommit``): in a savepoint of one
    /// transaction per batch, so that a body that throws fails alone, and returning only after
    /// the COMMIT that holds it. The body may run more than once (only its last run is
    /// committed). `order`: what the body locks (a poll's source): a batch runs its writes in
    /// this order, so that transactions locking the same rows lock them in one order.
    @discardableResult
    func performGrouped<T: Sendable>(order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T
    /// Closes connections (a clean stop).
    func close() async
}

extension StateDatabase {
    /// A backend without group commit commits each write alone.
    @discardableResult
    package func performGrouped<T: Sendable>(order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await perform(.write, body)
    }
}

extension StateDatabase {
    @discardableResult
    package func read<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try transaction(.read, body) }
    @discardableResult
    package func write<T>(_ body: (any SQLConnection) throws -> T) throws -> T { try transaction(.write, body) }
    @discardableResult
    package func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T { try await perform(.read, body) }
    @discardableResult
    package func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T { try await perform(.write, body) }
}
