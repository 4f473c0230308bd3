import CSQLite
import Glibc
import TidingsEngine

/// An error SQLite returned, worded as GRDB worded it: `SQLite error 5: database is locked -
/// while executing `BEGIN IMMEDIATE``.
package struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (extended codes are on for every connection).
    package var extendedCode: CInt
    package var message: String
    package var sql: String?

    /// The primary result code (`SQLITE_BUSY` for `SQLITE_BUSY_SNAPSHOT`).
    package var code: CInt { extendedCode & 0xff }
    /// Another connection holds the lock this one needs.
    package var isBusy: Bool { code == SQLITE_BUSY }
    /// The file is not a readable SQLite database.
    package var isUnreadable: Bool { code == SQLITE_CORRUPT || code == SQLITE_NOTADB }

    package var description: String {
        "SQLite error \(code): \(message)" + (sql.map { " - while executing `\($0)`" } ?? "")
    }
}

/// libsqlite3 could not be loaded (it is not linked: DESIGN §15): the soname, why, and the Debian
/// package to install. Opening the state fails with it, as with an unreadable directory.
package struct SQLiteUnavailable: Error, CustomStringConvertible {
    package var description: String
}

/// One SQLite connection (`sqlite3 *`) and its prepared statements, each prepared once and
/// reused (the statement cache). The only type that holds SQLite's pointers.
///
/// Not thread-safe: ``SQLiteStateDatabase`` hands a connection to one thread at a time (the
/// writer under its lock, a reader taken from the idle list), hence `@unchecked Sendable`.
final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// Opens `path` as GRDB configured its connections: extended result codes, the busy
    /// timeout, double-quoted string literals refused, foreign keys on, `synchronous =
    /// NORMAL`; then reads the schema, so that a file that is no database fails here. The first
    /// connection of the process loads libsqlite3.
    init(path: String, readOnly: Bool, busyTimeout: Double) throws {
        if let missing = tidings_sqlite3_load() { throw SQLiteUnavailable(description: String(cString: missing)) }
        var opened: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let code = tidings_sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: tidings_sqlite3_errmsg($0)) } ?? String(cString: tidings_sqlite3_errstr(code))
            tidings_sqlite3_close_v2(opened)
            throw SQLiteError(extendedCode: code, message: message, sql: nil)
        }
        handle = opened
        tidings_sqlite3_extended_result_codes(handle, 1)
        setBusyTimeout(busyTimeout)
        _ = tidings_sqlite3_db_config_int(handle, SQLITE_DBCONFIG_DQS_DML, 0)
        _ = tidings_sqlite3_db_config_int(handle, SQLITE_DBCONFIG_DQS_DDL, 0)
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA synchronous = NORMAL")
        _ = try fetchAll("SELECT * FROM sqlite_master LIMIT 1", [])
    }

    deinit {
        for statement in statements.values { tidings_sqlite3_finalize(statement) }
        tidings_sqlite3_close_v2(handle)
    }

    /// How long a statement waits for another connection's lock, in seconds (0: fails at once with `SQLITE_BUSY`).
    func setBusyTimeout(_ seconds: Double) {
        tidings_sqlite3_busy_timeout(handle, CInt(seconds * 1000))
    }

    /// Whether a transaction is open.
    var isInsideTransaction: Bool { tidings_sqlite3_get_autocommit(handle) == 0 }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { Int(tidings_sqlite3_changes(handle)) }

    /// Runs one statement or several (a script: no values, no rows).
    func execute(_ sql: String) throws {
        let code = tidings_sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code, sql) }
    }

    /// Runs `body` in a transaction opened with `begin` (`BEGIN IMMEDIATE`, `BEGIN DEFERRED`):
    /// committed when it returns and `commit` is true, else rolled back, and rolled back when it throws.
    func inTransaction<T>(_ begin: String, commit: Bool = true, _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let result = try body()
            try execute(commit ? "COMMIT" : "ROLLBACK")
            return result
        } catch {
            if isInsideTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Runs a statement; `row` sees each row's values.
    func run(_ sql: String, _ arguments: [SQLValue], row: ([SQLValue]) throws -> Void = { _ in }) throws {
        let statement = try prepared(sql)
        tidings_sqlite3_reset(statement)
        defer {
            tidings_sqlite3_reset(statement)
            tidings_sqlite3_clear_bindings(statement)
        }
        let parameters = Int(tidings_sqlite3_bind_parameter_count(statement))
        guard arguments.count == parameters else {
            throw SQLiteError(extendedCode: SQLITE_MISUSE, message: "\(arguments.count) values for \(parameters) parameters", sql: sql)
        }
        for (i, value) in arguments.enumerated() {
            let index = CInt(i + 1)
            let code: CInt
            switch value {
            case .null: code = tidings_sqlite3_bind_null(statement, index)
            case .integer(let n): code = tidings_sqlite3_bind_int64(statement, index, n)
            case .real(let d): code = tidings_sqlite3_bind_double(statement, index, d)
            case .text(var text):
                code = text.withUTF8 { bytes in
                    bytes.withMemoryRebound(to: CChar.self) {
                        guard let start = $0.baseAddress else { return tidings_sqlite3_bind_text_transient(statement, index, "", 0) }
                        return tidings_sqlite3_bind_text_transient(statement, index, start, CInt($0.count))
                    }
                }
            }
            guard code == SQLITE_OK else { throw error(code, sql) }
        }
        let columns = tidings_sqlite3_column_count(statement)
        while true {
            switch tidings_sqlite3_step(statement) {
            case SQLITE_DONE: return
            case SQLITE_ROW:
                var values: [SQLValue] = []
                values.reserveCapacity(Int(columns))
                for i in 0..<columns { values.append(Self.value(statement, i)) }
                try row(values)
            case let code: throw error(code, sql)
            }
        }
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        try run(sql, arguments) { rows.append(SQLRow($0)) }
        return rows
    }

    /// The cached statement for `sql`, prepared on first use. One statement only: a second
    /// one after it is refused (it would silently not run).
    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        var rest = ""
        let code = sql.withCString { start -> CInt in
            var tail: UnsafePointer<CChar>?
            let code = tidings_sqlite3_prepare_v3(handle, start, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, &tail)
            if let tail { rest = String(cString: tail) }
            return code
        }
        guard code == SQLITE_OK, let statement else { throw error(code, sql) }
        guard rest.allSatisfy({ $0.isWhitespace || $0 == ";" }) else {
            tidings_sqlite3_finalize(statement)
            throw SQLiteError(extendedCode: SQLITE_MISUSE, message: "more than one statement: \(rest)", sql: sql)
        }
        statements[sql] = statement
        return statement
    }

    private func error(_ code: CInt, _ sql: String) -> SQLiteError {
        SQLiteError(extendedCode: code, message: String(cString: tidings_sqlite3_errmsg(handle)), sql: sql)
    }

    /// The current row's column `i`. A BLOB (never written by tidings) reads as UTF-8 text.
    private static func value(_ statement: OpaquePointer, _ i: CInt) -> SQLValue {
        switch tidings_sqlite3_column_type(statement, i) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(tidings_sqlite3_column_int64(statement, i))
        case SQLITE_FLOAT: return .real(tidings_sqlite3_column_double(statement, i))
        case SQLITE_TEXT:
            guard let text = tidings_sqlite3_column_text(statement, i) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(tidings_sqlite3_column_bytes(statement, i))), as: UTF8.self))
        default:
            guard let blob = tidings_sqlite3_column_blob(statement, i) else { return .text("") }
            let bytes = UnsafeRawBufferPointer(start: blob, count: Int(tidings_sqlite3_column_bytes(statement, i)))
            return .text(String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// The seam's statements on one connection, for the length of a transaction.
struct SQLiteStatements: SQLConnection {
    let connection: SQLiteConnection
    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try connection.run(sql, arguments)
        return connection.changes
    }

    func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
        for row in rows { try connection.run(sql, row) }
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        try connection.fetchAll(sql, arguments)
    }
}
