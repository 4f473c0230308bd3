import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// The PostgreSQL ``StateDatabase`` (DESIGN §11): a database several daemons share.
///
/// The seam is synchronous inside a transaction, so each statement blocks its thread on a
/// postgres-nio future. That is safe because no caller is an event-loop thread:
/// ``transaction(_:_:)`` runs on the caller's thread (the CLI, tests), and ``perform(_:_:)``
/// hops to this database's own threads (a `NIOThreadPool` of `poolSize` threads), never the
/// cooperative pool. Connections come from a small pool (one transaction per connection at a
/// time); a connection that broke is replaced on its next use. No wait is unbounded: a
/// connection is set up within `connect_timeout`, a statement answered within
/// ``statementDeadline`` (else its connection is closed and the transaction fails).
package final class PostgresStateDatabase: StateDatabase {
    /// Seconds a statement may take. The pipeline's statements take milliseconds (a poll's
    /// transaction locks one lease row, held for as long as another poll's commit); a server
    /// that does not answer within this has hung, or the network has.
    package static let statementDeadline: Double = 30

    package let location: String
    package var dialect: SQLDialect { .postgres }
    package var isShared: Bool { true }

    private let pool: ConnectionPool
    private let threads: NIOThreadPool
    /// `?` statements rewritten to `$n`, once per SQL text.
    private let rewrites = Mutex<[String: String]>([:])
    let logger: Logger

    private init(location: String, pool: ConnectionPool, threads: NIOThreadPool, logger: Logger) {
        self.location = location
        self.pool = pool
        self.threads = threads
        self.logger = logger
    }

    /// Connects (one connection, so a wrong address or password fails here), and brings the
    /// schema up to date. Errors name `settings.location`, never the password.
    package static func open(_ settings: StateSettings, logger: Logger) throws -> PostgresStateDatabase {
        // postgres-nio logs every query at debug; the state's own messages are enough.
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        let configuration = try connectionConfiguration(settings)
        let size = max(1, settings.poolSize)
        let pool = ConnectionPool(
            size: size, configuration: configuration, connectTimeout: max(1, settings.connectTimeout), location: settings.location, logger: quiet)
        let threads = NIOThreadPool(numberOfThreads: size)
        threads.start()
        let db = PostgresStateDatabase(location: settings.location, pool: pool, threads: threads, logger: logger)
        do {
            try PostgresSchema.migrate(db)
        } catch {
            db.shutdownNow()
            throw error
        }
        return db
    }

    // MARK: StateDatabase

    @discardableResult
    package func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        let connection = try pool.acquire()
        var healthy = false
        defer { pool.release(connection, healthy: healthy) }
        let sql = PostgresSQLConnection(connection: connection, database: self)
        try sql.control(kind == .read ? "BEGIN READ ONLY" : "BEGIN")
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
                try sql.execute("COMMIT", [])
            } catch {
                healthy = !Self.lostConnection(error, connection) && (try? sql.control("ROLLBACK")) != nil
                throw error
            }
        }
        healthy = true
        return result
    }

    static func lostConnection(_ error: any Error, _ connection: PostgresConnection) -> Bool {
        connection.isClosed || (error as? PostgresStateError)?.connectionLost == true
    }

    @discardableResult
    package func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await threads.runIfActive { [self] in
            try transaction(kind, body)
        }
    }

    package func close() async {
        try? await threads.shutdownGracefully()
        await pool.close()
    }

    deinit {
        // Dropped without close(): its threads stop (the pool closes its connections itself).
        threads.shutdownGracefully { _ in }
    }

    /// For a failed open: nothing was handed out yet.
    private func shutdownNow() {
        threads.shutdownGracefully { _ in }
        pool.closeNow()
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

    // MARK: Connecting

    static func connectionConfiguration(_ settings: StateSettings) throws -> PostgresConnection.Configuration {
        let password = settings.password?.value
        var configuration: PostgresConnection.Configuration
        if settings.host.hasPrefix("/") {
            // A Unix socket: libpq's convention, DIR/.s.PGSQL.PORT. No TLS on a local socket.
            configuration = .init(
                unixSocketPath: "\(settings.host)/.s.PGSQL.\(settings.port)",
                username: settings.user, password: password, database: settings.database)
        } else {
            configuration = .init(
                host: settings.host, port: settings.port, username: settings.user, password: password,
                database: settings.database, tls: try tls(settings))
        }
        configuration.options.connectTimeout = .milliseconds(Int64(max(1, settings.connectTimeout) * 1000))
        return configuration
    }

    static func tls(_ settings: StateSettings) throws -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch settings.tls {
        case .disable: return .disable
        case .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let caFile = settings.caFile, settings.tls != .require {
            tls.trustRoots = .file(caFile)
        }
        do {
            return .require(try NIOSSLContext(configuration: tls))
        } catch {
            let ca = settings.caFile.map { " (ca_file \($0))" } ?? ""
            throw PostgresStateError(location: settings.location, what: "cannot set up TLS\(ca)", reason: "\(error)")
        }
    }
}

/// What went wrong talking to PostgreSQL: where, what, and the server's or the network's
/// reason. Never carries the password (a known secret is scrubbed out of the reason too).
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

    /// A postgres-nio error in words: the server's message, or the connection's failure.
    init(location: String, what: String, error: any Error) {
        guard let e = error as? PSQLError else {
            self.init(location: location, what: what, reason: Self.describe(error))
            return
        }
        if let info = e.serverInfo, let message = info[.message] {
            // Remote text: cut (a hostile or broken server may send 100 KB), one line, scrubbed.
            var reason = Self.excerpt(message)
            if let detail = info[.detail] { reason += "; \(Self.excerpt(detail))" }
            if let hint = info[.hint] { reason += " (hint: \(Self.excerpt(hint)))" }
            self.init(location: location, what: what, reason: reason, sqlState: info[.sqlState].map { Redactor.shared.excerpt(Data($0.utf8), limit: 16) })
            connectionLost = ["FATAL", "PANIC"].contains(info[.severity] ?? "")
            return
        }
        var reason: String
        switch e.code {
        case .sslUnsupported:
            reason = "the server does not offer TLS, and sslmode requires it (sslmode=disable for a server without TLS, on a trusted network only)"
        case .authMechanismRequiresPassword: reason = "the server asks for a password and none is configured ([state] password or password_file)"
        case .serverClosedConnection: reason = "the server closed the connection"
        case .clientClosedConnection: reason = "the connection was closed"
        case .connectionError: reason = "connection failed"
        case .uncleanShutdown: reason = "the connection ended uncleanly"
        case .unsupportedAuthMechanism: reason = "the server asks for an authentication method postgres-nio does not support"
        case .saslError: reason = "SCRAM authentication failed"
        default: reason = "\(e.code)"
        }
        if let underlying = e.underlying { reason += ": \(Self.describe(underlying))" }
        self.init(location: location, what: what, reason: reason)
        connectionLost = [.serverClosedConnection, .clientClosedConnection, .connectionError, .uncleanShutdown].contains(e.code)
    }

    /// The most of one field of a server's error shown in a message.
    static let maxServerText = 300

    static func excerpt(_ text: String) -> String { Redactor.shared.excerpt(Data(text.utf8), limit: maxServerText) }

    static func describe(_ error: any Error) -> String {
        if let e = error as? PostgresStateError { return e.reason }
        if let e = error as? IOError { return "\(e.description)" }
        if let e = error as? NIOSSLExtraError, e == .failedToValidateHostname {
            return "TLS: the server's certificate does not name the host connected to (verify-full checks the name; verify-ca only the chain)"
        }
        if let e = error as? NIOSSLExtraError { return "TLS: \(e)" }
        if let e = error as? NIOSSLError {
            if "\(e)".contains("CERTIFICATE_VERIFY_FAILED") {
                return "TLS: the server's certificate is not signed by a CA in ca_file (or, without ca_file, the system's) (\(e))"
            }
            return "TLS: \(e)"
        }
        if let e = error as? BoringSSLError { return "TLS: \(e)" }
        if let e = error as? ChannelError, case .connectTimeout(let t) = e {
            return "no connection within \(Double(t.nanoseconds) / 1e9) s"
        }
        return "\(error)"
    }
}

/// Statements on one pooled connection, inside the transaction the database opened.
struct PostgresSQLConnection: SQLConnection {
    let connection: PostgresConnection
    let database: PostgresStateDatabase
    var dialect: SQLDialect { .postgres }

    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        try run(sql, arguments).metadata.rows ?? 0
    }

    func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let result = try run(sql, arguments)
        return try result.rows.map { row in
            SQLRow(try row.map { try Self.value($0, location: database.location) })
        }
    }

    private func run(_ sql: String, _ arguments: [SQLValue]) throws -> PostgresQueryResult {
        let query = PostgresQuery(unsafeSQL: database.postgresSQL(sql), binds: Self.bindings(arguments))
        return try answer(query, within: PostgresStateDatabase.statementDeadline, what: "statement failed (\(Self.excerpt(sql)))")
    }

    /// BEGIN and ROLLBACK, which the server answers at once: a connection that does not answer
    /// within 10 s (one closing under it) is closed, and the transaction fails.
    func control(_ sql: String) throws {
        _ = try answer(PostgresQuery(unsafeSQL: sql), within: 10, what: "\(sql) failed")
    }

    /// The server's answer, waited for at most `seconds`. A server that accepted the
    /// connection and then stopped answering (hung, or a network that drops packets without
    /// a reset) would otherwise hold this thread, and the poll, for ever: past the deadline
    /// the connection is closed (the pool connects anew) and the statement fails.
    private func answer(_ query: PostgresQuery, within seconds: Double, what: String) throws -> PostgresQueryResult {
        guard let result = bounded(connection.query(query, logger: connection.logger), within: seconds) else {
            ConnectionPool.close(connection)
            var e = PostgresStateError(location: database.location, what: what, reason: "no answer within \(Int(seconds)) s; the connection is closed")
            e.connectionLost = true
            throw e
        }
        do {
            return try result.get()
        } catch {
            throw PostgresStateError(location: database.location, what: what, error: error)
        }
    }

    static func excerpt(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return flat.count > 120 ? String(flat.prefix(117)) + "…" : flat
    }

    static func bindings(_ values: [SQLValue]) -> PostgresBindings {
        var b = PostgresBindings(capacity: values.count)
        for v in values {
            switch v {
            case .null: b.appendNull()
            case .integer(let i): b.append(i)
            case .real(let d): b.append(d)
            case .text(let t): b.append(t)
            }
        }
        return b
    }

    /// Any type the server sends, as one of the four ``SQLValue``s.
    static func value(_ cell: PostgresCell, location: String) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        do {
            switch cell.dataType {
            case .int2, .int4, .int8: return .integer(try cell.decode(Int64.self))
            case .float4, .float8: return .real(try cell.decode(Double.self))
            case .numeric:
                let d = try cell.decode(Decimal.self)
                return .real(NSDecimalNumber(decimal: d).doubleValue)
            case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
            default: return .text(try cell.decode(String.self))
            }
        } catch {
            throw PostgresStateError(
                location: location, what: "cannot read column \(cell.columnName)",
                reason: "a \(cell.dataType) value tidings cannot decode")
        }
    }
}

/// `size` connections, each used by one transaction at a time. A transaction that finds none
/// free waits (on its own thread); a slot whose connection is missing or closed connects anew.
final class ConnectionPool: @unchecked Sendable {
    private let condition = NSCondition()
    /// Free slots: a connection, or nil for one to (re)connect.
    private var free: [PostgresConnection?]
    private var busy: [PostgresConnection] = []
    private var closed = false
    private let configuration: PostgresConnection.Configuration
    private let location: String
    private let logger: Logger
    private let ids = Atomic<Int>(0)
    /// Seconds a new connection may take, set-up and authentication included.
    private let connectTimeout: Double

    init(size: Int, configuration: PostgresConnection.Configuration, connectTimeout: Double, location: String, logger: Logger) {
        free = Array(repeating: nil, count: size)
        self.configuration = configuration
        self.connectTimeout = connectTimeout
        self.location = location
        self.logger = logger
    }

    func acquire() throws -> PostgresConnection {
        condition.lock()
        while free.isEmpty && !closed { condition.wait() }
        if closed {
            condition.unlock()
            throw PostgresStateError(location: location, what: "cannot start a transaction", reason: "the database was closed")
        }
        // The most recently used live connection first; a dead one is dropped.
        let slot = free.remove(at: free.lastIndex { $0 != nil } ?? free.count - 1)
        condition.unlock()
        if let slot, !slot.isClosed {
            markBusy(slot)
            return slot
        }
        do {
            let id = ids.wrappingAdd(1, ordering: .relaxed).newValue
            let connection = try Self.connect(
                PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration,
                    id: id, logger: logger), within: connectTimeout)
            markBusy(connection)
            return connection
        } catch {
            release(nil, healthy: false)
            throw PostgresStateError(location: location, what: "cannot connect", error: error)
        }
    }

    /// A connection, set up (TCP, TLS, authentication) within `seconds`, as libpq's
    /// `connect_timeout` bounds all of it: a server that accepts and then says nothing is a
    /// timeout, not a hang. One that comes up after the deadline is closed at once.
    static func connect(_ future: EventLoopFuture<PostgresConnection>, within seconds: Double) throws -> PostgresConnection {
        guard let result = bounded(future, within: seconds, late: { close($0) }) else {
            throw PostgresStateError(
                location: "", what: "", reason: "no answer within \(seconds.formatted()) s (the server accepted the connection, then said nothing)")
        }
        return try result.get()
    }

    private func markBusy(_ c: PostgresConnection) {
        condition.lock()
        busy.append(c)
        condition.unlock()
    }

    /// Gives a slot back; an unhealthy connection is closed and its slot reconnects on next use.
    func release(_ connection: PostgresConnection?, healthy: Bool) {
        condition.lock()
        if let connection { busy.removeAll { $0 === connection } }
        if let connection, !healthy || closed { Self.close(connection) }
        free.append(healthy ? connection : nil)
        condition.signal()
        condition.unlock()
    }

    private func takeAll() -> [PostgresConnection] {
        condition.lock()
        closed = true
        let all = free.compactMap { $0 } + busy
        free = []
        busy = []
        condition.broadcast()
        condition.unlock()
        return all
    }

    func close() async {
        for c in takeAll() { try? await c.close().get() }
    }

    func closeNow() {
        for c in takeAll() { Self.close(c) }
    }

    deinit { closeNow() }

    /// Closes without waiting; the connection is kept until it is closed (postgres-nio
    /// requires it, and a debug build asserts it).
    static func close(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }
}

/// `future`'s result, waited for on this thread at most `seconds`; nil past that. `late` gets
/// a value that arrives after the deadline (a connection to close).
func bounded<T: Sendable>(_ future: EventLoopFuture<T>, within seconds: Double, late: (@Sendable (T) -> Void)? = nil) -> Result<T, any Error>? {
    let done = DispatchSemaphore(value: 0)
    // The outcome, or `gaveUp` once the waiter stopped waiting.
    let state = Mutex<(outcome: Result<T, any Error>?, gaveUp: Bool)>((nil, false))
    future.whenComplete { result in
        let abandoned = state.withLock { s -> Bool in
            s.outcome = result
            return s.gaveUp
        }
        done.signal()
        if abandoned, case .success(let value) = result { late?(value) }
    }
    if done.wait(timeout: .now() + seconds) == .success { return state.withLock { $0.outcome } }
    // Completed between the wait and now: as good as in time.
    return state.withLock { s -> Result<T, any Error>? in
        s.gaveUp = true
        return s.outcome
    }
}
