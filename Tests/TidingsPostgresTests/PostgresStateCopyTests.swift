import Foundation
import TidingsPostgres
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `tidings state migrate`'s copy: a real SQLite state into a real PostgreSQL database.
final class PostgresStateCopyTests: XCTestCase {
    func testCopiesEveryTableOnceKeepingNumbers() throws {
        let sqlite = try TestState.makeDatabase(directory: try scratchDirectory(), backend: .sqlite)
        let settings = try PostgresTestServer.freshDatabase()
        let pg = try PostgresStateDatabase.open(settings, logger: TestState.logger)

        // 600 events (more than one batch), seq with gaps; a delivery for every third.
        try sqlite.transaction(.write) { sql in
            try sql.execute(
                "INSERT INTO source_state(source, provider, etag, failures, next_due, not_before) VALUES ('gh', 'github', 'W/\"x\"', 2, 1800000000.5, NULL)", []
            )
            try sql.execute("INSERT INTO source_state(source, provider) VALUES ('am', 'alertmanager')", [])
            try sql.execute(
                """
                INSERT INTO item(source, key, kind, fingerprint, state, first_seen, changed_at, snapshot, content_hash)
                VALUES ('gh', 'pr/1', 'pr', 'f1', 'open', 1.5, 2.5, '{"title":"it''s ? here"}', NULL)
                """, [])
            for n in 1...600 {
                let seq = Int64(n * 3)
                try sql.execute(
                    "INSERT INTO event(seq, id, source, kind, type, key, observed_at, payload, silenced_by) VALUES (?, ?, 'gh', 'pr', 'new', ?, ?, '{}', ?)",
                    [.integer(seq), .text("ev-\(n)"), .text("pr/\(n)"), .real(Double(n) + 0.25), n == 7 ? .text("s1") : .null])
                if n % 3 == 0 {
                    try sql.execute(
                        "INSERT INTO delivery(event_seq, sink, batch, status, next_attempt, created_at, hold_until, hold) VALUES (?, 'desk', 'b', 'pending', 1, 1, ?, ?)",
                        [.integer(seq), n == 3 ? .real(99.5) : .null, n == 3 ? .text("quiet") : .null])
                }
            }
            try sql.execute(
                "INSERT INTO notice(source, key, event_id, title, body, severity, created_at, updated_at, expires_at) VALUES ('gh', 'n1', 'ev-1', 'T', 'B', 'info', 1, 1, 9)",
                [])
            try sql.execute("INSERT INTO silence(id, matchers, created_by, created_at, starts_at, ends_at, silenced) VALUES ('s1', '[]', 'me', 1, 1, 2, 3)", [])
            try sql.execute("INSERT INTO reminder(source, key, route, last_at, count) VALUES ('gh', 'pr/1', 'r0', 5, 2)", [])
            try sql.execute("INSERT INTO instance(id, host, pid, started_at, seen_at) VALUES ('i1', 'h', 1, 1, 1)", [])
            try sql.execute("INSERT INTO lease(name, owner, expires_at) VALUES ('source:gh', 'i1', 9)", [])
        }

        let first = try StateCopy.copy(from: sqlite, to: pg)
        XCTAssertEqual(
            first.map(\.description),
            [
                "source_state: 2 copied, 0 already there", "item: 1 copied, 0 already there", "event: 600 copied, 0 already there",
                "delivery: 200 copied, 0 already there", "notice: 1 copied, 0 already there", "silence: 1 copied, 0 already there",
                "reminder: 1 copied, 0 already there",
            ])

        // Every copied row is the same on both sides, column for column.
        for table in StateCopy.tables {
            let order = ["item": "source, key", "notice": "source, key", "reminder": "source, key, route", "event": "seq", "delivery": "id"][table] ?? "1"
            let a = try sqlite.read { try $0.fetchAll("SELECT * FROM \(table) ORDER BY \(order)", []) }.map(\.values)
            let b = try pg.read { try $0.fetchAll("SELECT * FROM \(table) ORDER BY \(order)", []) }.map(\.values)
            XCTAssertEqual(a, b, table)
        }
        XCTAssertEqual(try pg.read { try $0.scalar("SELECT count(*) FROM instance") as Int? }, 0)
        XCTAssertEqual(try pg.read { try $0.scalar("SELECT count(*) FROM lease") as Int? }, 0)

        // A second run copies nothing.
        let second = try StateCopy.copy(from: sqlite, to: pg)
        XCTAssertEqual(second.map(\.copied), [0, 0, 0, 0, 0, 0, 0])
        XCTAssertEqual(second.map(\.alreadyThere), [2, 1, 600, 200, 1, 1, 1])

        // New rows continue after the copied numbers.
        let (seq, id) = try pg.transaction(.write) { sql -> (Int64?, Int64?) in
            let seq: Int64? = try sql.scalar(
                "INSERT INTO event(id, source, kind, type, key, observed_at, payload) VALUES ('new', 'gh', 'pr', 'new', 'k', 1, '{}') RETURNING seq")
            let id: Int64? = try sql.scalar(
                "INSERT INTO delivery(event_seq, sink, batch, status, next_attempt, created_at) VALUES (?, 'desk', 'b', 'pending', 1, 1) RETURNING id",
                [.integer(seq ?? 0)])
            return (seq, id)
        }
        XCTAssertEqual(seq, 1801)
        XCTAssertEqual(id, 201)

        // A row added to SQLite later is copied on the next run, alone.
        try sqlite.transaction(.write) {
            try $0.execute("INSERT INTO silence(id, matchers, created_by, created_at, starts_at, ends_at) VALUES ('s2', '[]', 'me', 1, 1, 2)", [])
        }
        let third = try StateCopy.copy(from: sqlite, to: pg)
        XCTAssertEqual(third.map(\.copied), [0, 0, 0, 0, 0, 1, 0])
        try awaitResult { await pg.close() }
    }
}
