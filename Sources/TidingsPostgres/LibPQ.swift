import CLibPQ
import FoundationEssentials
import Glibc
import TidingsEngine
import TidingsPluginAPI

// Everything of libpq the backend uses, behind Swift types: a `PGconn` lives in a
// ``PQConnection``, a `PGresult` never leaves this file. The connection is in non-blocking mode
// and every wait is a poll(2) with a deadline, so a server that stops answering costs a
// statement deadline, never a thread for ever.

/// libpq's connection parameters for `settings` (keyword, value), in the order libpq applies
/// them: the URL first (expanded by libpq itself, so every parameter psql reads from a URL
/// means the same here: `sslrootcert`, `connect_timeout`, `options`, `application_name`,
/// `service`…), then what `[state]` sets beside it, which wins.
func connectionParameters(_ settings: StateSettings) -> [(String, String)] {
    var p: [(String, String)] = [("dbname", settings.url?.absoluteString ?? "")]
    p.append(("sslmode", settings.tls.rawValue))
    if settings.tls != .require, let root = rootCertificate(settings) {
        // `require` checks no certificate: libpq would verify against a root file it is given.
        p.append(("sslrootcert", root))
    }
    p.append(("connect_timeout", "\(connectTimeoutSeconds(settings))"))
    if let password = settings.password?.value { p.append(("password", password)) }
    p.append(("fallback_application_name", "tidings"))
    return p
}

/// libpq counts `connect_timeout` in whole seconds, at least 2.
func connectTimeoutSeconds(_ settings: StateSettings) -> Int {
    let t = settings.connectTimeout
    return t.isFinite ? max(2, Int(t.rounded(.up))) : 10
}

/// The trust anchors for verify-ca and verify-full: `ca_file` (or `?sslrootcert=`), else
/// psql's `~/.postgresql/root.crt` when there is one, else the system's CAs (libpq 16 names
/// them `system`; libpq 15 is given the bundle's path).
func rootCertificate(_ settings: StateSettings) -> String? {
    if let ca = settings.caFile { return ca }
    guard settings.tls == .verifyCA || settings.tls == .verifyFull else { return nil }
    if let home = getenv("HOME").map({ String(cString: $0) }), access("\(home)/.postgresql/root.crt", R_OK) == 0 { return nil }
    if tidings_PQlibVersion() >= 160000 { return "system" }
    return ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"].first { access($0, R_OK) == 0 }
}

/// What libpq makes of the URL: nil if it reads it, else its complaint (an unknown parameter,
/// a malformed URL), for the config error.
func conninfoProblem(_ url: String) -> String? {
    var message: UnsafeMutablePointer<CChar>?
    guard let options = tidings_PQconninfoParse(url, &message) else {
        defer { if let message { tidings_PQfreemem(message) } }
        return message.map { String(cString: $0) }.map(oneLine) ?? "libpq cannot read it"
    }
    tidings_PQconninfoFree(options)
    return nil
}

/// libpq's multi-line messages on one line.
func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline).map { $0.trimmed() }.filter { !$0.isEmpty }.joined(separator: "; ")
}

/// A statement's outcome: its rows (text cells typed by the column's OID) and the count of
/// rows it changed.
struct PQAnswer {
    var rows: [SQLRow] = []
    var changed = 0
}

/// One libpq connection. Used by one thread at a time (the pool hands it out); closed
/// (`PQfinish`) when the last reference goes.
final class PQConnection: @unchecked Sendable {
    private let conn: OpaquePointer
    let location: String
    /// Set when a wait ran past its deadline: the connection is in an unknown state.
    private(set) var abandoned = false

    private init(_ conn: OpaquePointer, location: String) {
        self.conn = conn
        self.location = location
    }

    deinit { tidings_PQfinish(conn) }

    /// Connects (TCP or Unix socket, TLS, authentication) within libpq's `connect_timeout`.
    static func connect(_ parameters: [(String, String)], location: String, timeout: Int) throws -> PQConnection {
        let keys = parameters.map { strdup($0.0) } + [nil]
        let values = parameters.map { strdup($0.1) } + [nil]
        defer {
            for p in keys + values { free(p) }
        }
        let made = keys.map { $0.map { UnsafePointer($0) } }.withUnsafeBufferPointer { k in
            values.map { $0.map { UnsafePointer($0) } }.withUnsafeBufferPointer { v in
                tidings_PQconnectdbParams(k.baseAddress, v.baseAddress, 1)
            }
        }
        guard let conn = made else {
            throw PostgresStateError(location: location, what: "cannot connect", reason: "libpq is out of memory")
        }
        guard tidings_PQstatus(conn) == CONNECTION_OK else {
            let message = String(cString: tidings_PQerrorMessage(conn))
            tidings_PQfinish(conn)
            throw PostgresStateError(location: location, what: "cannot connect", reason: Self.explain(connectFailure: message, timeout: timeout))
        }
        tidings_PQsetnonblocking(conn, 1)
        return PQConnection(conn, location: location)
    }

    /// libpq's words for a failed connection, with what to do where tidings knows.
    /// The server's part of it is remote text: cut, one line, scrubbed.
    static func explain(connectFailure message: String, timeout: Int) -> String {
        let full = oneLine(message)
        let text = PostgresStateError.excerpt(full)
        if full.firstRange(of: "server does not support SSL") != nil {
            return "the server does not offer TLS, and sslmode requires it (sslmode=disable for a server without TLS, on a trusted network only)"
        }
        if full.firstRange(of: "does not match host name") != nil {
            return "TLS: the server's certificate does not name the host connected to (verify-full checks the name; verify-ca only the chain) (\(text))"
        }
        if full.firstRange(of: "certificate verify failed") != nil {
            return "TLS: the server's certificate is not signed by a CA in ca_file (or, without ca_file, the system's) (\(text))"
        }
        if full.firstRange(of: "timeout expired") != nil {
            return "no answer within \(timeout) s (connect_timeout: the server did not answer, or accepted the connection and then said nothing)"
        }
        if full.firstRange(of: "no password supplied") != nil {
            return "the server asks for a password and none is configured ([state] password or password_file) (\(text))"
        }
        if full.hasSuffix(":") {
            // libpq names no reason: the server's answer was none it reads (an error over 30,000 bytes…).
            return "\(text) the server's answer is not one libpq reads"
        }
        return text
    }

    /// The server's own `statement_timeout`, `seconds`, unless the URL (`options`), the role or
    /// the database already set one: a statement that runs too long is then cancelled by the
    /// server (SQLSTATE 57014) and the connection kept, before tidings' own deadline drops it.
    func setStatementTimeout(_ seconds: Double) throws {
        let ms = Int(seconds * 1000)
        _ = try simple(
            "SELECT set_config('statement_timeout', '\(ms)ms', false) WHERE current_setting('statement_timeout') = '0'",
            within: seconds, what: "cannot set statement_timeout")
    }

    /// The connection broke (the server ended it, the socket closed) or was abandoned.
    var isBroken: Bool { abandoned || tidings_PQstatus(conn) != CONNECTION_OK }

    /// Statements without parameters not sent yet: the transaction's BEGIN, a savepoint's
    /// SAVEPOINT and RELEASE (group commit). They go out with the next statement, in one
    /// pipeline (one round trip for all). A transaction that runs no statement costs none.
    private var pending: [String] = []

    /// Starts a transaction with the next statement (`BEGIN`, `BEGIN READ ONLY`).
    func begin(_ sql: String) { pending = [sql] }

    /// Sends `sql` (no parameters, no rows) with the next statement.
    func sendLater(_ sql: String) { pending.append(sql) }

    /// A statement without parameters, by the simple protocol (COMMIT, ROLLBACK), after those
    /// not sent yet (then in one pipeline). Ending a transaction whose BEGIN was never sent
    /// sends nothing.
    func simple(_ sql: String, within seconds: Double, what: String) throws -> PQAnswer {
        let deadline = Self.now() + UInt64(seconds * 1e9)
        if !pending.isEmpty {
            let queued = pending
            pending = []
            if queued[0].hasPrefix("BEGIN") && (sql == "COMMIT" || sql == "ROLLBACK") { return PQAnswer() }
            if sql != "ROLLBACK" {
                return try pipelined(deadline: deadline, seconds: seconds, what: what) {
                    for statement in queued { try send(statement, Bound([], types: []), what: what) }
                    try send(sql, Bound([], types: []), what: what)
                }.last ?? PQAnswer()
            }
        }
        guard tidings_PQsendQuery(conn, sql) == 1 else { throw failure(what) }
        return try collect(deadline: deadline, seconds: seconds, what: what)
    }

    /// One statement with `$n` parameters (after those not sent yet, in one pipeline).
    func run(_ sql: String, _ arguments: [SQLValue], within seconds: Double, what: String) throws -> PQAnswer {
        let deadline = Self.now() + UInt64(seconds * 1e9)
        let bound = Bound(arguments, types: arguments.map(Self.type))
        guard !pending.isEmpty else {
            try send(sql, bound, what: what)
            return try collect(deadline: deadline, seconds: seconds, what: what)
        }
        let queued = pending
        pending = []
        return try pipelined(deadline: deadline, seconds: seconds, what: what) {
            for statement in queued { try send(statement, Bound([], types: []), what: what) }
            try send(sql, bound, what: what)
        }.last ?? PQAnswer()
    }

    private func send(_ sql: String, _ bound: Bound, what: String) throws {
        let sent = bound.withPointers { values in
            bound.types.withUnsafeBufferPointer { types in
                tidings_PQsendQueryParams(conn, sql, Int32(bound.texts.count), types.baseAddress, values, nil, nil, 0)
            }
        }
        guard sent == 1 else { throw failure(what) }
    }

    /// One statement once per argument list, in pipeline mode: prepared once, every execution
    /// sent before any answer is read, one round trip in all (with those not sent yet). The
    /// first failure is thrown (the server skips the rest, and the transaction is then aborted).
    func runMany(_ sql: String, _ rows: [[SQLValue]], within seconds: Double, what: String) throws {
        guard let first = rows.first else { return }
        let deadline = Self.now() + UInt64(seconds * 1e9)
        // A column's type: the one its values share (integers beside reals: float8), else left to the server.
        let types = (0..<first.count).map { column -> Oid in
            let seen = Set(rows.map { column < $0.count ? Self.type($0[column]) : 0 }).subtracting([0])
            if seen.count == 1 { return seen.first! }
            return seen == [Self.int8, Self.float8] ? Self.float8 : 0
        }
        let queued = pending
        pending = []
        _ = try pipelined(deadline: deadline, seconds: seconds, what: what) {
            for statement in queued { try send(statement, Bound([], types: []), what: what) }
            let prepared = types.withUnsafeBufferPointer { tidings_PQsendPrepare(conn, "", sql, Int32(types.count), $0.baseAddress) }
            guard prepared == 1 else { throw failure(what) }
            for row in rows {
                let bound = Bound(row, types: types)
                let sent = bound.withPointers { tidings_PQsendQueryPrepared(conn, "", Int32(row.count), $0, nil, nil, 0) }
                guard sent == 1 else { throw failure(what) }
            }
        }
    }

    /// The statements `send` queues, run in pipeline mode up to one sync: each one's answer,
    /// in order, or the first failure (the server skips every statement after it).
    private func pipelined(deadline: UInt64, seconds: Double, what: String, _ send: () throws -> Void) throws -> [PQAnswer] {
        guard tidings_PQenterPipelineMode(conn) == 1 else { throw failure(what) }
        defer { if tidings_PQpipelineStatus(conn) != PQ_PIPELINE_OFF && !isBroken { _ = tidings_PQexitPipelineMode(conn) } }
        try send()
        guard tidings_PQpipelineSync(conn) == 1 else { throw failure(what) }
        var answers: [PQAnswer] = []
        var current = PQAnswer()
        var firstError: PostgresStateError?
        reading: while true {
            guard let result = try next(deadline: deadline, seconds: seconds, what: what) else {
                // The end of one statement's results; a connection that broke sends nothing more.
                if isBroken {
                    var e = firstError ?? failure(what)
                    e.connectionLost = true
                    throw e
                }
                answers.append(current)
                current = PQAnswer()
                continue
            }
            defer { tidings_PQclear(result) }
            switch tidings_PQresultStatus(result) {
            case PGRES_PIPELINE_SYNC: break reading
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK: current = Self.answer(result, location: location)
            case PGRES_PIPELINE_ABORTED: break
            case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
                firstError = firstError ?? Self.error(result, location: location, what: what)
            default:
                firstError = firstError ?? unexpected(result, what: what)
            }
        }
        if var e = firstError {
            if isBroken { e.connectionLost = true }
            throw e
        }
        return answers
    }

    // MARK: Waiting

    /// Sends what is buffered, and reads every result of one statement.
    private func collect(deadline: UInt64, seconds: Double, what: String) throws -> PQAnswer {
        var answer = PQAnswer()
        var error: PostgresStateError?
        while let result = try next(deadline: deadline, seconds: seconds, what: what) {
            defer { tidings_PQclear(result) }
            switch tidings_PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
                answer = Self.answer(result, location: location)
            case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
                error = error ?? Self.error(result, location: location, what: what)
            default:
                error = error ?? unexpected(result, what: what)
            }
        }
        if let error {
            var e = error
            if isBroken { e.connectionLost = true }
            throw e
        }
        if isBroken { throw failure(what) }
        return answer
    }

    /// The next result, or nil at the end of one statement's: flushes the request and waits
    /// for the server until `deadline`, then gives up on the connection.
    private func next(deadline: UInt64, seconds: Double, what: String) throws -> OpaquePointer? {
        while true {
            let flushed = tidings_PQflush(conn)
            if flushed < 0 { throw failure(what) }
            if flushed == 0 && tidings_PQisBusy(conn) == 0 { return tidings_PQgetResult(conn) }
            let now = Self.now()
            guard now < deadline else {
                abandoned = true
                var e = PostgresStateError(location: location, what: what, reason: "no answer within \(Int(seconds)) s; the connection is closed")
                e.connectionLost = true
                throw e
            }
            var fd = pollfd(fd: tidings_PQsocket(conn), events: Int16(POLLIN) | (flushed == 1 ? Int16(POLLOUT) : 0), revents: 0)
            let ms = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let ready = poll(&fd, 1, ms)
            if ready < 0 && errno != EINTR { throw failure(what) }
            if ready > 0 && fd.revents & Int16(POLLIN | POLLERR | POLLHUP) != 0 && tidings_PQconsumeInput(conn) == 0 { throw failure(what) }
        }
    }

    /// A result of a kind no statement of tidings' makes (COPY…).
    private func unexpected(_ result: OpaquePointer, what: String) -> PostgresStateError {
        PostgresStateError(
            location: location, what: what, reason: "an answer tidings does not expect (\(String(cString: tidings_PQresStatus(tidings_PQresultStatus(result)))))")
    }

    /// The connection's last error (a broken connection: `connectionLost`).
    private func failure(_ what: String) -> PostgresStateError {
        var e = PostgresStateError(location: location, what: what, reason: oneLine(String(cString: tidings_PQerrorMessage(conn))))
        if e.reason.isEmpty { e.reason = "the connection failed" }
        e.connectionLost = isBroken
        return e
    }

    static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    // MARK: Values

    static let int8: Oid = 20
    static let float8: Oid = 701
    static let text: Oid = 25

    /// A parameter's type (int8, float8, text; unknown for NULL, which the server infers).
    static func type(_ value: SQLValue) -> Oid {
        switch value {
        case .null: 0
        case .integer: int8
        case .real: float8
        case .text: text
        }
    }

    /// Parameters in libpq's text format, kept alive for one send.
    struct Bound {
        let texts: [String?]
        let types: [Oid]

        init(_ values: [SQLValue], types: [Oid]) {
            self.types = types
            texts = values.map { v in
                switch v {
                case .null: nil
                case .integer(let i): String(i)
                case .real(let d): d.isNaN ? "NaN" : d.isInfinite ? (d < 0 ? "-Infinity" : "Infinity") : "\(d)"
                case .text(let t): t
                }
            }
        }

        func withPointers<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
            let copies = texts.map { $0.map { strdup($0) } ?? nil }
            defer { for p in copies { free(p) } }
            return copies.map { $0.map { UnsafePointer($0) } }.withUnsafeBufferPointer { body($0.baseAddress) }
        }
    }

    /// Rows in the four ``SQLValue``s, by each column's type.
    static func answer(_ result: OpaquePointer, location: String) -> PQAnswer {
        var answer = PQAnswer()
        answer.changed = Int(String(cString: tidings_PQcmdTuples(result))) ?? 0
        let columns = tidings_PQnfields(result)
        let types = (0..<columns).map { tidings_PQftype(result, $0) }
        let count = tidings_PQntuples(result)
        answer.rows.reserveCapacity(Int(count))
        for row in 0..<count {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for column in 0..<columns {
                if tidings_PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                    continue
                }
                let text = String(cString: tidings_PQgetvalue(result, row, column))
                values.append(value(text, type: types[Int(column)]))
            }
            answer.rows.append(SQLRow(values))
        }
        return answer
    }

    /// A cell's text as its type says: int2/int4/int8 integers, float4/float8/numeric reals,
    /// booleans 0/1, everything else text.
    static func value(_ text: String, type: Oid) -> SQLValue {
        switch type {
        case 20, 21, 23: Int64(text).map(SQLValue.integer) ?? .text(text)
        case 700, 701, 1700: Double(text).map(SQLValue.real) ?? .text(text)
        case 16: .integer(text == "t" ? 1 : 0)
        default: .text(text)
        }
    }

    /// The server's error in words: its message, detail and hint (remote text: cut, one
    /// line, scrubbed), and its SQLSTATE. A FATAL or PANIC one ended the connection.
    static func error(_ result: OpaquePointer, location: String, what: String) -> PostgresStateError {
        func field(_ code: Character) -> String? {
            tidings_PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        guard let message = field("M") else {
            let text = oneLine(String(cString: tidings_PQresultErrorMessage(result)))
            return PostgresStateError(location: location, what: what, reason: text.isEmpty ? "the statement failed" : PostgresStateError.excerpt(text))
        }
        var reason = PostgresStateError.excerpt(message)
        if let detail = field("D") { reason += "; \(PostgresStateError.excerpt(detail))" }
        if let hint = field("H") { reason += " (hint: \(PostgresStateError.excerpt(hint)))" }
        let state = field("C").map { Redactor.shared.excerpt(Data($0.utf8), limit: 16) }
        var e = PostgresStateError(location: location, what: what, reason: reason, sqlState: state)
        e.connectionLost = ["FATAL", "PANIC"].contains(field("V") ?? field("S") ?? "")
        return e
    }
}
