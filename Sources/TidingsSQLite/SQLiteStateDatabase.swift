import FoundationEssentials
import GRDB
import GRDBSQLite
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// The SQLite ``StateDatabase``: one file in the state directory, in WAL mode (readers never
/// wait for the writer).
///
/// From async code nothing waits for a lock on the cooperative thread pool:
/// - Reads run in place: in WAL mode a read waits for nobody, and a hop to another thread
///   costs more than the read (benchmark 2).
/// - A write runs in place when it can start at once: no other write of this process is under
///   way (GRDB's writer queue is idle, so entering it does not wait) and SQLite's write lock
///   is free (`BEGIN IMMEDIATE` tried with no busy timeout). Otherwise (a `tidings` command is
///   writing, or another poll's commit is) it waits on GRDB's writer queue, off the pool. The
///   lock is almost always free, and the two thread switches of the queue cost the daemon
///   about 0.7 points of a core with 10,000 sources (benchmark 2).
package final class SQLiteStateDatabase: StateDatabase {
    package let pool: DatabasePool
    package let path: String
    package var location: String { path }
    package var dialect: SQLDialect { .sqlite }
    /// One daemon per file (``StateLock``).
    package var isShared: Bool { false }
    /// The connection's busy timeout (``StateStore``'s `busyMode`), restored after an attempt in place.
    private let busyTimeout: Double
    /// Writes of this process under way or waiting for the writer queue: one runs in place only when there are none.
    private let writes = Mutex(0)

    package init(pool: DatabasePool, path: String, busyTimeout: Double) {
        self.pool = pool
        self.path = path
        self.busyTimeout = busyTimeout
    }

    /// A write attempted in place: done, or it would have had to wait.
    private enum Attempt<T> {
        case done(T)
        case wouldWait
    }

    /// Runs `body` as one transaction on the calling thread if that needs no waiting; else `.wouldWait`, and nothing ran.
    private func attemptInPlace<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> Attempt<T> {
        guard
            writes.withLock({ (n: inout Int) -> Bool in
                guard n == 0 else { return false }
                n = 1
                return true
            })
        else { return .wouldWait }
        defer { writes.withLock { $0 -= 1 } }
        return try pool.writeWithoutTransaction { db in
            guard let connection = db.sqliteConnection else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the state database is closed") }
            sqlite3_busy_timeout(connection, 0)
            let began = Result { try db.beginTransaction(.immediate) }
            sqlite3_busy_timeout(connection, CInt(busyTimeout * 1000))
            if case .failure(let error as DatabaseError) = began, error.resultCode == .SQLITE_BUSY { return .wouldWait }
            try began.get()
            // The write lock is held: nothing below waits for another connection.
            do {
                let result = try body(GRDBConnection(db: db))
                if kind == .dryRun { try db.rollback() } else { try db.commit() }
                return .done(result)
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
    }

    /// Counts a write while it runs or waits for the writer queue, so that none runs in place meanwhile.
    private func counted<T>(_ body: () throws -> T) rethrows -> T {
        writes.withLock { $0 += 1 }
        defer { writes.withLock { $0 -= 1 } }
        return try body()
    }

    private func counted<T>(_ body: () async throws -> T) async rethrows -> T {
        writes.withLock { $0 += 1 }
        defer { writes.withLock { $0 -= 1 } }
        return try await body()
    }

    /// `body` in a transaction that is rolled back.
    private static func dryRun<T>(_ db: Database, _ body: (any SQLConnection) throws -> T) throws -> T {
        var result: T?
        try db.inTransaction {
            result = try body(GRDBConnection(db: db))
            return .rollback
        }
        return result!
    }

    package func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        switch kind {
        case .read: return try pool.read { try body(GRDBConnection(db: $0)) }
        case .write: return try counted { try pool.write { try body(GRDBConnection(db: $0)) } }
        case .dryRun: return try counted { try pool.writeWithoutTransaction { try Self.dryRun($0, body) } }
        }
    }

    package func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        if kind == .read { return try transaction(.read, body) }
        if case .done(let result) = try attemptInPlace(kind, body) { return result }
        return try await counted {
            if kind == .write { return try await pool.write { try body(GRDBConnection(db: $0)) } }
            return try await pool.writeWithoutTransaction { try Self.dryRun($0, body) }
        }
    }

    package func close() async {}
}

/// Statements on a GRDB connection, each prepared once per connection (GRDB's statement
/// cache), then bound, stepped and read with SQLite's own calls: going through GRDB's
/// `StatementArguments` and `Row` (an existential per value, a second copy of every row) was
/// most of what the seam added to a poll (benchmark 3: events inserted at a third of the
/// speed). GRDB still opens, migrates and configures the database, runs the transactions,
/// and prepares the statements.
struct GRDBConnection: SQLConnection {
    let db: Database
    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try run(db.cachedStatement(sql: sql), arguments) { _ in }
        return db.changesCount
    }

    func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
        guard !rows.isEmpty else { return }
        let statement = try db.cachedStatement(sql: sql)
        for row in rows { try run(statement, row) { _ in } }
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let statement = try db.cachedStatement(sql: sql)
        let columns = CInt(statement.columnCount)
        var out: [SQLRow] = []
        try run(statement, arguments) { handle in
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for i in 0..<columns { values.append(Self.value(handle, i)) }
            out.append(SQLRow(values))
        }
        return out
    }

    /// Binds `arguments`, steps the statement to its end (calling `row` on each row), and
    /// leaves it reset with no bindings, as GRDB leaves a statement it ran.
    private func run(_ statement: Statement, _ arguments: [SQLValue], row: (SQLiteStatement) throws -> Void) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        guard arguments.count == Int(sqlite3_bind_parameter_count(handle)) else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "\(arguments.count) values for \(sqlite3_bind_parameter_count(handle)) parameters", sql: statement.sql)
        }
        for (i, value) in arguments.enumerated() {
            let index = CInt(i + 1)
            let code: CInt
            switch value {
            case .null: code = sqlite3_bind_null(handle, index)
            case .integer(let n): code = sqlite3_bind_int64(handle, index, n)
            case .real(let d): code = sqlite3_bind_double(handle, index, d)
            case .text(var text):
                code = text.withUTF8 { sqlite3_bind_text(handle, index, $0.baseAddress, CInt($0.count), Self.transient) }
            }
            guard code == SQLITE_OK else { throw error(code, statement) }
        }
        while true {
            switch sqlite3_step(handle) {
            case SQLITE_DONE: return
            case SQLITE_ROW: try row(handle)
            case let code: throw error(code, statement)
            }
        }
    }

    private func error(_ code: CInt, _ statement: Statement) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }, sql: statement.sql)
    }

    /// SQLite copies the bytes (the Swift string's storage is only borrowed for the call).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// The current row's column `i`. A BLOB (never written by tidings) reads as UTF-8 text.
    static func value(_ statement: SQLiteStatement, _ i: CInt) -> SQLValue {
        switch sqlite3_column_type(statement, i) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, i))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, i) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, i))), as: UTF8.self))
        default:
            guard let blob = sqlite3_column_blob(statement, i) else { return .text("") }
            let bytes = UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(statement, i)))
            return .text(String(decoding: bytes, as: UTF8.self))
        }
    }
}
