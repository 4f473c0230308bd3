import Foundation
import Logging
import Synchronization
import TidingsPostgres
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The PostgreSQL backend of the storage seam, against a real server (``PostgresTestServer``).
final class PostgresStateDatabaseTests: XCTestCase {
    var opened: [PostgresStateDatabase] = []

    override func tearDown() async throws {
        for db in opened { await db.close() }
        opened = []
    }

    func open(_ settings: StateSettings? = nil, poolSize: Int = 4) throws -> PostgresStateDatabase {
        let db = try PostgresStateDatabase.open(settings ?? PostgresTestServer.freshDatabase(poolSize: poolSize), logger: TestState.logger)
        opened.append(db)
        return db
    }

    // MARK: Placeholders

    func testPlaceholdersAreNumberedOutsideQuotesAndComments() {
        let cases: [(String, String)] = [
            ("SELECT ?", "SELECT $1"),
            ("INSERT INTO t(a, b, c) VALUES (?, ?, ?)", "INSERT INTO t(a, b, c) VALUES ($1, $2, $3)"),
            ("SELECT '?' || ? FROM t WHERE \"odd?\" = ?", "SELECT '?' || $1 FROM t WHERE \"odd?\" = $2"),
            ("SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1"),
            ("SELECT \"a\"\"?\" , ?", "SELECT \"a\"\"?\" , $1"),
            ("SELECT ? -- why?\n, ?", "SELECT $1 -- why?\n, $2"),
            ("SELECT /* ? */ ?", "SELECT /* ? */ $1"),
            ("SELECT 'no placeholders'", "SELECT 'no placeholders'"),
            ("SELECT ?::regclass, ?", "SELECT $1::regclass, $2"),
            ("SELECT 'é?' , ?, 'ü'", "SELECT 'é?' , $1, 'ü'"),
        ]
        for (sql, expected) in cases {
            XCTAssertEqual(PostgresStateDatabase.numberPlaceholders(sql), expected, sql)
        }
        var many = (1...12).map { _ in "?" }.joined(separator: ",")
        many = PostgresStateDatabase.numberPlaceholders(many)
        XCTAssertEqual(many, (1...12).map { "$\($0)" }.joined(separator: ","))
    }

    // MARK: Values

    func testEverySQLValueRoundTrips() throws {
        let db = try open()
        let values: [(SQLValue, SQLValue, SQLValue)] = [
            (.integer(0), .real(0), .text("")),
            (.integer(Int64.max), .real(.pi), .text("it's \"quoted\" ? and $1")),
            (.integer(Int64.min), .real(-1e300), .text("ünïcode ✓ \u{1F514}")),
            (.integer(-1), .real(0.1), .text("line\nbreak\ttab")),
            (.null, .null, .null),
        ]
        try db.write { sql in
            try sql.execute("CREATE TABLE v(n BIGINT, i BIGINT, d DOUBLE PRECISION, t TEXT)", [])
            for (n, v) in values.enumerated() {
                try sql.execute("INSERT INTO v(n, i, d, t) VALUES (?, ?, ?, ?)", [.integer(Int64(n)), v.0, v.1, v.2])
            }
        }
        let rows = try db.read { try $0.fetchAll("SELECT i, d, t FROM v ORDER BY n", []) }
        XCTAssertEqual(rows.map(\.values), values.map { [$0.0, $0.1, $0.2] })
        // A value compared through a placeholder finds its row.
        let found: Int64? = try db.read { try $0.scalar("SELECT n FROM v WHERE t = ? AND i = ?", [values[1].2, values[1].0]) }
        XCTAssertEqual(found, 1)
    }

    func testServerTypesDecodeToSQLValues() throws {
        let db = try open()
        let row = try db.read {
            try $0.fetchOne(
                """
                SELECT 1::int2, 2::int4, 3::int8, 1.5::float4, 2.5::float8, 3.25::numeric, true, false,
                       'v'::varchar, 'n'::name, 'u', NULL, 'x'::text || ?, ? + 1, ? * 2.0
                """, [.text("y"), .integer(41), .real(1.25)])
        }
        XCTAssertEqual(
            row?.values,
            [
                .integer(1), .integer(2), .integer(3), .real(1.5), .real(2.5), .real(3.25), .integer(1), .integer(0),
                .text("v"), .text("n"), .text("u"), .null, .text("xy"), .integer(42), .real(2.5),
            ])
    }

    func testExecuteCountsChangedRows() throws {
        let db = try open()
        let changed = try db.write { sql -> [Int] in
            try sql.execute("CREATE TABLE c(a BIGINT)", [])
            return [
                try sql.execute("INSERT INTO c VALUES (1), (2), (3)", []),
                try sql.execute("UPDATE c SET a = a + 1 WHERE a >= ?", [.integer(2)]),
                try sql.execute("DELETE FROM c WHERE a = ?", [.integer(99)]),
            ]
        }
        XCTAssertEqual(changed, [3, 2, 0])
    }

    /// ``SQLConnection/executeMany(_:_:)`` runs in libpq's pipeline mode: every row lands, and
    /// a failing row fails the call with its SQLSTATE, the transaction rolled back and the
    /// connection fine afterwards.
    func testExecuteManyPipelinesRowsAndReportsTheFirstFailure() throws {
        let db = try open(poolSize: 1)
        let rows: [[SQLValue]] = (0..<500).map { [.integer(Int64($0)), $0 % 7 == 0 ? .null : .text("v\($0)"), .real(Double($0) / 4)] }
        try db.write { sql in
            try sql.execute("CREATE TABLE m(k BIGINT PRIMARY KEY, t TEXT, d DOUBLE PRECISION)", [])
            try sql.executeMany("INSERT INTO m(k, t, d) VALUES (?, ?, ?)", rows)
        }
        XCTAssertEqual(try db.read { try $0.fetchAll("SELECT k, t, d FROM m ORDER BY k", []) }.map(\.values), rows)
        XCTAssertThrowsError(
            try db.write { sql in
                try sql.executeMany(
                    "INSERT INTO m(k, t, d) VALUES (?, ?, ?)",
                    [[.integer(1000), .text("new"), .real(0)], [.integer(3), .text("dup"), .real(0)], [.integer(1001), .null, .null]])
            }
        ) { error in
            XCTAssertEqual((error as? PostgresStateError)?.sqlState, "23505", "\(error)")
            XCTAssertTrue("\(error)".contains(db.location), "\(error)")
        }
        XCTAssertEqual(try db.read { try $0.scalar("SELECT count(*) FROM m") as Int? }, 500)
        XCTAssertEqual(try db.read { try $0.scalar("SELECT count(*) FROM m WHERE k >= 1000") as Int? }, 0)
    }

    // MARK: Transactions

    func testThrowingBodyRollsBack() throws {
        let db = try open()
        struct Boom: Error {}
        XCTAssertThrowsError(
            try db.write { sql in
                try sql.execute("INSERT INTO silence(id, matchers, created_by, created_at, starts_at, ends_at) VALUES ('s1', '[]', 'me', 1, 1, 2)", [])
                throw Boom()
            }
        ) { XCTAssertTrue($0 is Boom) }
        let n: Int? = try db.read { try $0.scalar("SELECT count(*) FROM silence") }
        XCTAssertEqual(n, 0)
        // The connection is usable afterwards (one connection: the same one).
        let one = try open(poolSize: 1)
        XCTAssertThrowsError(try one.write { _ in throw Boom() })
        XCTAssertEqual(try one.read { try $0.scalar("SELECT 7") as Int? }, 7)
    }

    func testFailedStatementRollsBackAndNamesTheDatabase() throws {
        let db = try open(poolSize: 1)
        XCTAssertThrowsError(
            try db.write { sql in
                try sql.execute("INSERT INTO lease(name, expires_at) VALUES ('a', 1)", [])
                try sql.execute("INSERT INTO lease(name, expires_at) VALUES ('a', 2)", [])
            }
        ) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains(db.location), text)
            XCTAssertTrue(text.contains("23505"), text)
        }
        XCTAssertEqual(try db.read { try $0.scalar("SELECT count(*) FROM lease") as Int? }, 0)
    }

    /// BEGIN goes out with the first statement (one pipeline): the statements still run in one
    /// transaction (now() is its start), a read one read-only from its first statement, and a
    /// transaction that ran no statement leaves the connection ready.
    func testBeginSentWithTheFirstStatementStillMakesOneTransaction() throws {
        let db = try open(poolSize: 1)
        let (first, second) = try db.write { sql -> (String?, String?) in
            let a: String? = try sql.scalar("SELECT now()::text")
            _ = try sql.fetchAll("SELECT pg_sleep(0.01)", [])
            return (a, try sql.scalar("SELECT now()::text"))
        }
        XCTAssertNotNil(first)
        XCTAssertEqual(first, second, "two statements, two transactions")
        XCTAssertEqual(try db.read { try $0.scalar("SELECT current_setting('transaction_read_only')") as String? }, "on")
        struct Boom: Error {}
        try db.write { _ in }
        try db.read { _ in }
        XCTAssertThrowsError(try db.write { _ in throw Boom() })
        try db.transaction(.dryRun) { _ in }
        XCTAssertEqual(try db.write { try $0.scalar("SELECT current_setting('transaction_read_only')") as String? }, "off")
    }

    func testDryRunRollsBack() throws {
        let db = try open()
        let seen: Int? = try db.transaction(.dryRun) { sql in
            try sql.execute("INSERT INTO lease(name, expires_at) VALUES ('dry', 1)", [])
            return try sql.scalar("SELECT count(*) FROM lease")
        }
        XCTAssertEqual(seen, 1, "the dry run sees its own writes")
        XCTAssertEqual(try db.read { try $0.scalar("SELECT count(*) FROM lease") as Int? }, 0)
        let async: Int? = try awaitResult {
            try await db.perform(.dryRun) { sql in
                try sql.execute("INSERT INTO lease(name, expires_at) VALUES ('dry', 1)", [])
                return try sql.scalar("SELECT count(*) FROM lease")
            }
        }
        XCTAssertEqual(async, 1)
        XCTAssertEqual(try db.read { try $0.scalar("SELECT count(*) FROM lease") as Int? }, 0)
    }

    func testReadTransactionIsReadOnly() throws {
        let db = try open()
        XCTAssertThrowsError(try db.read { try $0.execute("INSERT INTO lease(name) VALUES ('r')", []) }) {
            XCTAssertTrue("\($0)".contains("25006"), "\($0)")  // read_only_sql_transaction
        }
    }

    func testBrokenConnectionIsReplacedOnNextUse() throws {
        let db = try open(poolSize: 1)
        let first: Int? = try db.read { try $0.scalar("SELECT pg_backend_pid()") }
        XCTAssertThrowsError(try db.write { try $0.fetchAll("SELECT pg_terminate_backend(pg_backend_pid())", []) })
        let second: Int? = try db.read { try $0.scalar("SELECT pg_backend_pid()") }
        XCTAssertNotNil(second)
        XCTAssertNotEqual(first, second)
    }

    /// Each `perform` body blocks its thread (0.2 s); with them on the backend's own threads, a
    /// task on the cooperative pool keeps ticking meanwhile. Run on the cooperative pool
    /// (2 × poolSize bodies on as few threads as cores), they would stall it for 0.2 s or more.
    func testPerformDoesNotBlockTheCooperativePool() async throws {
        let db = try open(poolSize: 2)
        let start = ContinuousClock.now
        let ticker = Task { () -> Duration in
            var worst = Duration.zero
            var last = ContinuousClock.now
            while ContinuousClock.now - start < .milliseconds(700) {
                try? await Task.sleep(for: .milliseconds(10))
                worst = max(worst, ContinuousClock.now - last)
                last = ContinuousClock.now
            }
            return worst
        }
        let names = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await db.perform(.read) { sql in
                        usleep(200_000)
                        return (Thread.current.name ?? "") + ":" + ((try sql.scalar("SELECT 1") as Int?).map(String.init) ?? "")
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - start
        let worst = await ticker.value
        XCTAssertEqual(names.count, 4)
        XCTAssertTrue(names.allSatisfy { $0.hasSuffix(":1") }, "\(names)")
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(400), "two threads, four bodies of 0.2 s")
        XCTAssertLessThan(worst, .milliseconds(180), "the cooperative pool stalled")
    }

    // MARK: Group commit

    /// Poll writes queued while the only thread is busy are committed as ONE transaction (the
    /// same transaction id in every write), each in a savepoint: a write whose body throws and
    /// one whose statement fails (a unique violation aborts the transaction, the savepoint
    /// saves it) fail alone with their own errors; the others all land.
    func testWritesQueuedBehindABusyThreadCommitAsOneBatchAndAFailingOneFailsAlone() async throws {
        let db = try open(poolSize: 1)
        try await db.write { sql in
            try sql.execute("CREATE TABLE scratch(x BIGINT UNIQUE)", [])
            try sql.execute("INSERT INTO scratch(x) VALUES (-1)", [])
        }
        struct Refused: Error {}
        let n = 10
        let results = try await whileThreadsBusy(db, writes: n) { i, sql -> Int64 in
            try sql.execute("INSERT INTO scratch(x) VALUES (?)", [.integer(Int64(i))])
            if i == 3 { throw Refused() }
            if i == 7 { try sql.execute("INSERT INTO scratch(x) VALUES (-1)", []) }
            return try sql.scalar("SELECT txid_current()") ?? -1
        }
        XCTAssertTrue(results[3].isFailure { $0 is Refused }, "\(results[3])")
        XCTAssertTrue(results[7].isFailure { ($0 as? PostgresStateError)?.sqlState == "23505" }, "\(results[7])")
        let transactions = Set(results.compactMap { try? $0.get() })
        XCTAssertEqual(transactions.count, 1, "one transaction for the batch: \(transactions)")
        let landed: [Int] = try await db.read { try $0.fetchAll("SELECT x FROM scratch ORDER BY x", []).map { try $0[0] } }
        XCTAssertEqual(landed, [-1] + (0..<n).filter { $0 != 3 && $0 != 7 })
        XCTAssertEqual(db.group.tally, GroupCommit.Tally(commits: 1, writes: n - 2, failedAlone: 2))
        XCTAssertEqual(db.group.unfinished, 0)
    }

    /// A write that loses the connection (the server ends it) cannot be rolled back to its
    /// savepoint: it fails alone, and the others of its batch run again on a new connection.
    func testAWriteThatLosesTheConnectionFailsAloneAndTheOthersRunAgain() async throws {
        let db = try open(poolSize: 1)
        try await db.write { try $0.execute("CREATE TABLE scratch(x BIGINT)", []) }
        let n = 6
        let results = try await whileThreadsBusy(db, writes: n) { i, sql -> Int in
            try sql.execute("INSERT INTO scratch(x) VALUES (?)", [.integer(Int64(i))])
            if i == 2 { _ = try sql.fetchAll("SELECT pg_terminate_backend(pg_backend_pid())", []) }
            return i
        }
        XCTAssertTrue(results[2].isFailure { ($0 as? PostgresStateError)?.connectionLost == true }, "\(results[2])")
        for i in 0..<n where i != 2 { XCTAssertEqual(try? results[i].get(), i) }
        let landed: [Int] = try await db.read { try $0.fetchAll("SELECT x FROM scratch ORDER BY x", []).map { try $0[0] } }
        XCTAssertEqual(landed, [0, 1, 3, 4, 5])
        XCTAssertEqual(db.group.tally.commits, 1, "the batch without the lost write, committed once")
    }

    /// Runs `writes` grouped writes while a transaction holds every thread of `db` (a pool of
    /// one), then lets it go: each write's result, by index (their order in a batch: the index).
    private func whileThreadsBusy<T: Sendable>(
        _ db: PostgresStateDatabase, writes n: Int, _ body: @escaping @Sendable (Int, any SQLConnection) throws -> T
    ) async throws -> [Result<T, any Error>] {
        let gate = Mutex(false)
        let holding = Mutex(false)
        let blocker = Task {
            try await db.perform(.write) { _ in
                holding.withLock { $0 = true }
                while !gate.withLock({ $0 }) { usleep(1000) }
            }
        }
        while !holding.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        let results = startGroupedWrites(db, count: n, body)
        while db.group.unfinished < n { try await Task.sleep(for: .milliseconds(1)) }
        gate.withLock { $0 = true }
        try await blocker.value
        return await results.value
    }

    // MARK: Opening

    func testThreeDaemonsMigrateOneDatabaseAtOnce() throws {
        let server = try PostgresTestServer.shared()
        let settings = server.settings(database: try server.createDatabase(), poolSize: 1)
        let results = Mutex3()
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            results.add(Result { try PostgresStateDatabase.open(settings, logger: TestState.logger) })
        }
        let dbs = try results.all.map { try $0.get() }
        opened += dbs
        XCTAssertEqual(dbs.count, 3)
        let migrations = try dbs[0].read { try $0.fetchAll("SELECT id FROM schema_migrations", []).map { try $0[0] as String } }
        XCTAssertEqual(migrations, PostgresSchema.migrations.map(\.id))
    }

    func testNewerSchemaIsRefused() throws {
        let settings = try PostgresTestServer.freshDatabase()
        let db = try open(settings)
        try db.write { try $0.execute("INSERT INTO schema_migrations(id, applied_at) VALUES ('v99-future', 0)", []) }
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger)) { error in
            XCTAssertTrue(error is StateStore.NewerSchemaError, "\(error)")
            XCTAssertTrue("\(error)".contains("v99-future"), "\(error)")
        }
    }

    /// The same tables and columns, in the same order, as the SQLite store after all its migrations.
    func testSchemaMatchesSQLite() throws {
        let sqlite = try TestState.makeDatabase(directory: try scratchDirectory(), backend: .sqlite)
        let db = try open()
        let tables = try sqlite.read {
            try $0.fetchAll("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%' ORDER BY name", []).map
            { try $0[0] as String }
        }
        let pgTables = try db.read {
            try $0.fetchAll(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'schema_migrations' ORDER BY table_name",
                []
            ).map { try $0[0] as String }
        }
        XCTAssertEqual(pgTables, tables)
        let mapped = ["INTEGER": "bigint", "DOUBLE": "double precision", "TEXT": "text"]
        for table in tables {
            let expected = try sqlite.read { try $0.fetchAll("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?) ORDER BY cid", [.text(table)]) }
                .map { "\(try $0[0] as String) \(mapped[try $0[1] as String] ?? "?") \(try $0[2] as Int == 1 || (try $0[3] as Int) > 0 ? "NOT NULL" : "NULL")" }
            let actual = try db.read {
                try $0.fetchAll(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                    [.text(table)])
            }
            .map { "\(try $0[0] as String) \(try $0[1] as String) \(try $0[2] as String == "NO" ? "NOT NULL" : "NULL")" }
            XCTAssertEqual(actual, expected, table)
        }
        let indexes = try sqlite.read {
            try $0.fetchAll("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name", []).map { try $0[0] as String }
        }
        let pgIndexes = try db.read {
            try $0.fetchAll(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' ORDER BY indexname",
                []
            ).map { try $0[0] as String }
        }
        XCTAssertEqual(pgIndexes, indexes)
    }

    func testConnectsOverTheUnixSocket() throws {
        let server = try PostgresTestServer.shared()
        let settings = server.settings(database: try server.createDatabase(), unixSocket: true)
        XCTAssertTrue(settings.host.hasPrefix("/"), settings.host)
        let db = try open(settings)
        XCTAssertEqual(try db.read { try $0.scalar("SELECT current_database()") as String? }, settings.database)
    }

    func testWrongPasswordFailsWithoutThePassword() throws {
        let server = try PostgresTestServer.shared()
        let wrong = "wrong-\(UInt64.random(in: 1 ... .max))"
        let settings = server.settings(database: try server.createDatabase(), password: wrong)
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger)) { error in
            let text = "\(error) \(String(reflecting: error))"
            XCTAssertTrue(text.contains("password authentication failed"), text)
            XCTAssertTrue(text.contains(settings.location), text)
            XCTAssertFalse(text.contains(wrong), text)
            XCTAssertFalse(text.contains(server.password), text)
        }
    }

    func testRequiredTLSAgainstAServerWithoutTLSFails() throws {
        let server = try PostgresTestServer.shared()
        let settings = server.settings(database: try server.createDatabase(), tls: .require)
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("does not offer TLS"), text)
            XCTAssertTrue(text.contains(settings.location), text)
        }
    }

    // MARK: libpq's connection string

    /// The URL goes to libpq as psql's would: its parameters (`application_name`, `options`)
    /// reach the server, its statement_timeout wins over tidings' 25 s; without
    /// `application_name`, the server sees "tidings".
    func testLibpqURLParametersReachTheServer() throws {
        let server = try PostgresTestServer.shared()
        var settings = server.settings(database: try server.createDatabase())
        let plain = try open(settings)
        let defaults = try plain.read { try $0.fetchOne("SELECT current_setting('application_name'), current_setting('statement_timeout')", []) }
        XCTAssertEqual(defaults?.values, [.text("tidings"), .text("25s")], "tidings' name, and the server's statement_timeout")
        settings.url = URL(
            string: settings.url!.absoluteString + "&application_name=tidings-n5&options=-c%20lock_timeout%3D4321%20-c%20statement_timeout%3D7s")
        let db = try open(settings)
        let seen = try db.read {
            try $0.fetchOne("SELECT current_setting('application_name'), current_setting('lock_timeout'), current_setting('statement_timeout')", [])
        }
        XCTAssertEqual(seen?.values, [.text("tidings-n5"), .text("4321ms"), .text("7s")])
    }

    /// A parameter libpq does not know is refused when the state opens, in libpq's words;
    /// never a password.
    func testAnUnknownURLParameterIsLibpqsError() throws {
        let server = try PostgresTestServer.shared()
        var settings = server.settings(database: try server.createDatabase())
        settings.url = URL(string: settings.url!.absoluteString + "&no_such_parameter=1")
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("invalid URI query parameter") && text.contains("no_such_parameter"), text)
            XCTAssertFalse(text.contains(server.password), text)
        }
    }

    // MARK: TLS (a second server with ssl=on; its certificate names DNS:localhost only)

    func tlsSettings(_ mode: StateSettings.TLSMode, caFile: (PostgresTestServer) -> String?, host: String = "127.0.0.1") throws -> StateSettings {
        let server = try PostgresTestServer.sharedTLS()
        return server.settings(database: try server.createDatabase(), tls: mode, caFile: caFile(server), host: host)
    }

    /// The connection is really encrypted: the server's own view of it.
    func assertEncrypted(_ settings: StateSettings, file: StaticString = #filePath, line: UInt = #line) throws {
        let db = try open(settings)
        let ssl: Int? = try db.read { try $0.scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") }
        XCTAssertEqual(ssl, 1, "sslmode \(settings.tls.rawValue)", file: file, line: line)
    }

    func assertRefused(_ settings: StateSettings, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger), file: file, line: line) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("cannot connect") && text.contains(settings.location), text, file: file, line: line)
            XCTAssertTrue(text.localizedCaseInsensitiveContains(expected), "\(text) lacks \(expected)", file: file, line: line)
        }
    }

    func testSSLModeRequireEncryptsWithoutCheckingTheCertificate() throws {
        try assertEncrypted(try tlsSettings(.require, caFile: { $0.otherCAFile }))
    }

    func testSSLModeVerifyCAChecksTheChainNotTheName() throws {
        // 127.0.0.1 is not in the certificate: verify-ca does not care, verify-full does.
        try assertEncrypted(try tlsSettings(.verifyCA, caFile: { $0.caFile }))
        assertRefused(try tlsSettings(.verifyCA, caFile: { $0.otherCAFile }), "not signed by a CA in ca_file")
    }

    func testSSLModeVerifyFullChecksChainAndName() throws {
        try assertEncrypted(try tlsSettings(.verifyFull, caFile: { $0.caFile }, host: "localhost"))
        assertRefused(try tlsSettings(.verifyFull, caFile: { $0.caFile }), "certificate does not name the host")
        assertRefused(try tlsSettings(.verifyFull, caFile: { $0.otherCAFile }, host: "localhost"), "not signed by a CA in ca_file")
    }

    func testNoServerFailsWithinTheConnectTimeout() throws {
        var settings = try PostgresTestServer.shared().settings(database: "none")
        settings.url = URL(string: "postgres://tidings@127.0.0.1:1/none?sslmode=disable")
        let start = Date()
        XCTAssertThrowsError(try PostgresStateDatabase.open(settings, logger: TestState.logger)) { error in
            XCTAssertTrue("\(error)".contains("cannot connect"), "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
    }
}

/// Results collected from several threads.
final class Mutex3: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<PostgresStateDatabase, any Error>] = []
    func add(_ r: Result<PostgresStateDatabase, any Error>) { lock.withLock { results.append(r) } }
    var all: [Result<PostgresStateDatabase, any Error>] { lock.withLock { results } }
}

/// Waits (on a test's own thread, not the cooperative pool) for async work.
func awaitResult<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<T, any Error>?
    Task {
        do { result = .success(try await body()) } catch { result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try result!.get()
}
