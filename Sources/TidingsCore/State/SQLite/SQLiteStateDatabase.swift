import Foundation
import GRDB

/// The SQLite ``StateDatabase``: one file in the state directory, in WAL mode (readers never
/// wait for the writer). GRDB runs async transactions on its own dispatch queues, so the
/// daemon's writes never block the cooperative thread pool.
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
        case .read: return try await pool.read { try body(GRDBConnection(db: $0)) }
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

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: Self.arguments(arguments))
        var out: [SQLRow] = []
        while let r = try rows.next() {
            out.append(SQLRow(r.databaseValues.map(Self.value)))
        }
        return out
    }

    static func arguments(_ values: [SQLValue]) -> StatementArguments {
        StatementArguments(values.map { v -> (any DatabaseValueConvertible)? in
            switch v {
            case .null: return nil
            case .integer(let i): return i
            case .real(let d): return d
            case .text(let t): return t
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
