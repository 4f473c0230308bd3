import FoundationEssentials
import Glibc
import Logging
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// The PostgreSQL ``StateDatabase`` (DESIGN §11): a database several daemons share, over
/// libpq (PostgreSQL's own client library; TLS through its OpenSSL).
///
/// libpq blocks, and so does the seam inside a transaction: ``transaction(_:_:)`` runs on the
/// caller's thread (the CLI, tests), and ``perform(_:_:)`` hands the transaction to this
/// database's own threads (`poolSize` of them), never the cooperative pool. Connections come
/// from a small pool (one transaction per connection at a time); a connection that broke is
/// replaced on its next use. No wait is unbounded: a connection is set up within libpq's
/// `connect_timeout`, a statement answered within ``statementDeadline`` (else its connection
/// is closed and the transaction fails).
package final class PostgresStateDatabase: StateDatabase {
    /// Seconds a statement may take. The pipeline's statements take milliseconds (a poll's
    /// transaction locks one lease row, held for as long as another poll's commit); a server
    /// that does not answer within this has hung, or the network has.
    package static let statementDeadline: Double = 30
    /// The server's `statement_timeout` on tidings' connections, unless the URL's `options`, the
    /// role or the database set another: shorter than ``statementDeadline``, so a slow statement
    /// is cancelled by the server (SQLSTATE 57014) and its connection kept.
    package static let serverStatementTimeout: Double = 25
    /// Seconds ROLLBACK may take (the server answers it at once).
    static let controlDeadline: Double = 10

    package let location: String
    package var dialect: SQLDialect { .postgres }
    package var isShared: Bool { true }

    private let pool: ConnectionPool
    private let threads: WorkerThreads
    /// Poll writes waiting for a thread, committed in batches (its tally: tests, figures).
    package let group = GroupCommit()
    /// `?` statements rewritten to `$n`, once per SQL text.
    private let rewrites = Mutex<[String: String]>([:])
    let logger: Logger

    private init(location: String, pool: ConnectionPool, threads: WorkerThreads, logger: Logger) {
        self.location = location
        self.pool = pool
        self.threads = threads
        self.logger = logger
    }

    /// Connects (one connection, so a wrong address or password fails here), and brings the
    /// schema up to date. Errors name `settings.location`, never the password.
    package static func open(_ settings: StateSettings, logger: Logger) throws -> PostgresStateDatabase {
        let pool = try ConnectionPool(settings)
        let threads = WorkerThreads(count: max(1, settings.poolSize), name: "tidings-pg")
        let db = PostgresStateDatabase(location: settings.location, pool: pool, threads: threads, logger: logger)
        do {
            try PostgresSchema.migrate(db)
        } catch {
            db.shutdownNow()
            throw error
        }
        return db
    }

    /// Runs one statement on a connection of its own, outside any transaction (`CREATE
    /// DATABASE` cannot run inside one), and closes it: for set-up and tests.
    package static func runAlone(_ sql: String, on settings: StateSettings) throws {
        let pool = try ConnectionPool(settings)
        let connection = try pool.acquire()
        defer { pool.release(connection, healthy: false) }
        _ = try connection.simple(sql, within: statementDeadline, what: "\(PostgresSQLConnection.excerpt(sql)) failed")
    }

    // MARK: StateDatabase

    @discardableResult
    package func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        let connection = try pool.acquire()
        var healthy = false
        defer { pool.release(connection, healthy: healthy) }
        let sql = PostgresSQLConnection(connection: connection, database: self)
        // Sent with the first statement (one round trip for both).
        connection.begin(kind == .read ? "BEGIN READ ONLY" : "BEGIN")
        let result: T
        do {
            result = try body(sql)
        } catch {
            // A connection that is gone, or cannot even roll back, is dropped (and replaced on
            // next use).
            healthy = !Self.lostConnection(error, connection) && (try? sql.control("ROLLBACK")) != nil
            throw error
        }
        if kind == .dryRun {
            try sql.control("ROLLBACK")
        } else {
            do {
                try sql.commit()
            } catch {
                healthy = !Self.lostConnection(error, connection) && (try? sql.control("ROLLBACK")) != nil
                throw error
            }
        }
        healthy = true
        return result
    }

    static func lostConnection(_ error: any Error, _ connection: PQConnection) -> Bool {
        connection.isBroken || (error as? PostgresStateError)?.connectionLost == true
    }

    @discardableResult
    package func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let accepted = threads.submit { [self] in
                c.resume(with: Result { try transaction(kind, body) })
            }
            if !accepted {
                c.resume(throwing: PostgresStateError(location: location, what: "cannot start a transaction", reason: "the database was closed"))
            }
        }
    }

    /// Group commit (``GroupCommit``): a poll's write waits for a thread of this database like
    /// any transaction; the thread that takes it commits every poll write queued by then (up to
    /// 64) in one transaction, each in a savepoint. Batches form while every thread is busy;
    /// each saves a COMMIT's round trip and the server's WAL flush per poll, and the
    /// savepoints' statements go out with the next statement (no round trip of their own).
    @discardableResult
    package func performGrouped<T: Sendable>(order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await group.perform(
            order: order, body,
            schedule: { threads.submit { [self] in group.runPending { batch in try transaction(.write, batch) } } },
            refused: PostgresStateError(location: location, what: "cannot start a transaction", reason: "the database was closed"))
    }

    package func close() async {
        threads.stop()
        pool.close()
    }

    deinit {
        // Dropped without close(): its threads stop once idle, its idle connections close.
        threads.stop()
        pool.close()
    }

    /// For a failed open: nothing was handed out yet.
    private func shutdownNow() {
        threads.stop()
        pool.close()
    }

    // MARK: Statements

    /// `sql` with `?` placeholders numbered `$1, $2…` (cached per text).
    func postgresSQL(_ sql: String) -> String {
        if let done = rewrites.withLock({ $0[sql] }) { return done }
        let rewritten = Self.numberPlaceholders(sql)
        rewrites.withLock { cache in
            // Statements are mostly fixed texts; `IN (?, ?, …)` lists of every length are not.
            if cache.count >= 4096 { cache.removeAll(keepingCapacity: true) }
            cache[sql] = rewritten
        }
        return rewritten
    }

    /// Rewrites each `?` outside string literals ('…'), quoted identifiers ("…") and comments
    /// (`--…`, `/*…*/`) to `$1`, `$2`…
    package static func numberPlaceholders(_ sql: String) -> String {
        enum Mode {
            case code
            case quote(Character)
            case lineComment, blockComment
        }
        var out = ""
        out.reserveCapacity(sql.utf8.count + 8)
        var mode = Mode.code
        var n = 0
        var previous: Character = " "
        for c in sql {
            switch mode {
            case .code:
                if c == "?" {
                    n += 1
                    out += "$\(n)"
                    previous = " "
                    continue
                }
                if c == "'" || c == "\"" {
                    mode = .quote(c)
                } else if c == "-" && previous == "-" {
                    mode = .lineComment
                } else if c == "*" && previous == "/" {
                    mode = .blockComment
                }
            case .quote(let q):
                // A doubled quote ('it''s') closes and reopens: the same result.
                if c == q {
                    mode = .code
                    out.append(c)
                    previous = " "
                    continue
                }
            case .lineComment:
                if c == "\n" { mode = .code }
            case .blockComment:
                if c == "/" && previous == "*" {
                    mode = .code
                    out.append(c)
                    previous = " "
                    continue
                }
            }
            out.append(c)
            previous = c
        }
        return out
    }

}

/// What went wrong talking to PostgreSQL: where, what, and the server's or libpq's reason.
/// Never carries the password (a known secret is scrubbed out of the reason too).
package struct PostgresStateError: Error, CustomStringConvertible {
    package var location: String
    package var what: String
    package var reason: String
    /// The server's SQLSTATE (`23505` a unique violation, `40001` a serialization failure…).
    package var sqlState: String?
    /// The connection ended with it (a FATAL error from the server, a closed socket).
    package var connectionLost = false

    package init(location: String, what: String, reason: String, sqlState: String? = nil) {
        self.location = location
        self.what = what
        self.reason = Redactor.shared.scrub(reason)
        self.sqlState = sqlState
    }

    package var description: String {
        "PostgreSQL state \(location): \(what): \(reason)\(sqlState.map { " (SQLSTATE \($0))" } ?? "")"
    }

    /// The most of one field of a server's error shown in a message.
    static let maxServerText = 300

    static func excerpt(_ text: String) -> String { Redactor.shared.excerpt(Data(text.utf8), limit: maxServerText) }
}

/// Statements on one pooled connection, inside the transaction the database opened.
struct PostgresSQLConnection: SQLConnection {
    let connection: PQConnection
    let database: PostgresStateDatabase
    var dialect: SQLDialect { .postgres }

    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try run(sql, arguments).changed
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        try run(sql, arguments).rows
    }

    /// In pipeline mode: every row's statement sent before the first answer is read.
    func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws {
        if rows.count < 2 {
            for row in rows { try execute(sql, row) }
            return
        }
        try connection.runMany(
            database.postgresSQL(sql), rows, within: PostgresStateDatabase.statementDeadline, what: "statement failed (\(Self.excerpt(sql)))")
    }

    private func run(_ sql: String, _ arguments: [SQLValue]) throws -> PQAnswer {
        try connection.run(
            database.postgresSQL(sql), arguments, within: PostgresStateDatabase.statementDeadline, what: "statement failed (\(Self.excerpt(sql)))")
    }

    /// ROLLBACK, which the server answers at once: a connection that does not answer
    /// within 10 s (one closing under it) is closed, and the transaction fails.
    func control(_ sql: String) throws {
        _ = try connection.simple(sql, within: PostgresStateDatabase.controlDeadline, what: "\(sql) failed")
    }

    /// SAVEPOINT and RELEASE go out with the next statement; ROLLBACK TO at once (the
    /// transaction is aborted until it is answered, and a lost connection shows here).
    func savepoint(_ step: SavepointStep) throws {
        switch step {
        case .begin, .release: connection.sendLater(step.sql)
        case .rollback: try control(step.sql)
        }
    }

    func commit() throws {
        _ = try connection.simple("COMMIT", within: PostgresStateDatabase.statementDeadline, what: "COMMIT failed")
    }

    static func excerpt(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return flat.count > 120 ? String(flat.prefix(117)) + "…" : flat
    }
}
