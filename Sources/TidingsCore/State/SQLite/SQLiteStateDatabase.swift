import Foundation
import GRDB

/// The SQLite ``StateDatabase``: one file in the state directory, in WAL mode (readers never
/// wait for the writer). Writes from async code run on GRDB's writer queue, so waiting for
/// the write lock (a `tidings` command writing at the same moment) never blocks the
/// cooperative thread pool. Reads from async code run in place: in WAL mode a read waits for
/// nobody, and a hop to another thread costs more than the read (benchmark 2).
package final class SQLiteStateDatabase: StateDatabase {
    package let pool: DatabasePool
    package let path: String
    package var location: String { path }
    package var dialect: SQLDialect { .sqlite }
    /// One daemon per file (``StateLock``).
    package var isShared: Bool { false }

    package init(pool: DatabasePool, path: String) {
        self.pool = pool
        self.path = path
    }

    package func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        switch kind {
        case .read: return try pool.read { try body(GRDBConnection(db: $0)) }
        case .write: return try pool.write { try body(GRDBConnection(db: $0)) }
        case .dryRun:
            var result: T?
            try pool.writeWithoutTransaction { db in
                try db.inTransaction {
                    result = try body(GRDBConnection(db: db))
                    return .rollback
                }
            }
            return result!
        }
    }

    package func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        switch kind {
        case .read: return try transaction(.read, body)
        case .write: return try await pool.write { try body(GRDBConnection(db: $0)) }
        case .dryRun:
            return try await pool.writeWithoutTransaction { db in
                var result: T?
                try db.inTransaction {
                    result = try body(GRDBConnection(db: db))
                    return .rollback
                }
                return result!
            }
        }
    }

    package func close() async {}
}

/// Statements on a GRDB connection, each prepared once per connection (GRDB's statement cache).
struct GRDBConnection: SQLConnection {
    let db: Database
    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try db.cachedStatement(sql: sql).execute(arguments: Self.arguments(arguments))
        return db.changesCount
    }

    func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
        guard !rows.isEmpty else { return }
        let statement = try db.cachedStatement(sql: sql)
        for row in rows { try statement.execute(arguments: Self.arguments(row)) }
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: Self.arguments(arguments))
        var out: [SQLRow] = []
        while let r = try rows.next() {
            out.append(SQLRow(r.databaseValues.map(Self.value)))
        }
        return out
    }

    static func arguments(_ values: [SQLValue]) -> StatementArguments {
        // DatabaseValue, not existentials: one conversion, no boxing.
        StatementArguments(values.map { v -> DatabaseValue in
            switch v {
            case .null: return .null
            case .integer(let i): return i.databaseValue
            case .real(let d): return d.databaseValue
            case .text(let t): return t.databaseValue
            }
        })
    }

    static func value(_ v: DatabaseValue) -> SQLValue {
        switch v.storage {
        case .null: return .null
        case .int64(let i): return .integer(i)
        case .double(let d): return .real(d)
        case .string(let s): return .text(s)
        case .blob(let b): return .text(String(decoding: b, as: UTF8.self))
        }
    }
}
