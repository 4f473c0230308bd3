import FoundationEssentials
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI

/// A lease round's renewal on PostgreSQL, on TidingsPostgres's test server whatever
/// `TIDINGS_TEST_BACKEND` says (issue 33: lease renewals batched): every lease an instance
/// holds is renewed by one statement, however many it holds; a lease another instance took
/// is not renewed (fencing).
final class LeaseRenewalTests: XCTestCase {
    var opened: [any StateDatabase] = []
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    override func tearDown() async throws {
        for db in opened { await db.close() }
        opened = []
    }

    /// A fresh PostgreSQL database, its statements logged.
    func open() throws -> StatementLog {
        let db = StatementLog(try TestState.makeDatabase(directory: "", backend: .postgres))
        opened.append(db)
        return db
    }

    func instance(_ n: Int) -> Instance { Instance(id: "instance-\(n)", host: "host\(n)", pid: Int32(1000 + n)) }

    func wants(_ sources: Int, length: TimeInterval = 30) -> LeaseWants {
        var w = LeaseWants()
        for i in 0..<sources { w.sources[LeaseBook.sourceLease("s\(i)")] = length }
        w.sinks[LeaseBook.sinkLease("hook")] = length
        return w
    }

    /// One round at `t` seconds after t0, its statements counted.
    func round(_ db: StatementLog, _ i: Instance, _ w: LeaseWants, at t: TimeInterval, known: inout KnownLeases) throws -> (
        held: LeaseBook.Held, statements: [String]
    ) {
        _ = db.take(touching: "lease")
        let held = try db.write { sql in
            try LeaseBook.round(sql, instance: i, wants: w, liveWindow: 20, grace: 10, now: self.t0.addingTimeInterval(t), known: &known)
        }
        return (held, db.take(touching: "lease"))
    }

    func expiries(_ db: StatementLog) throws -> [String: Double] {
        var out: [String: Double] = [:]
        for r in try db.read({ try $0.fetchAll("SELECT name, expires_at FROM lease", []) }) { out[try r[0] as String] = try r[1] as Double }
        return out
    }

    /// A steady round renews all N held leases (sources and the sink) in one UPDATE, and the
    /// round's statement count does not grow with N.
    func testOneStatementRenewsEveryHeldLease() throws {
        var counts: [Int] = []
        for n in [10, 400] {
            let db = try open()
            let a = instance(1)
            var known = KnownLeases()
            XCTAssertEqual(try round(db, a, wants(n), at: 0, known: &known).held.sources.count, n, "alone, it takes every source")
            let (held, statements) = try round(db, a, wants(n), at: 5, known: &known)
            XCTAssertEqual(held.sources.count, n)
            XCTAssertEqual(held.sinks, [LeaseBook.sinkLease("hook")])
            let renewals = statements.filter { $0.hasPrefix("UPDATE lease SET expires_at") }
            XCTAssertEqual(renewals.count, 1, "\(statements)")
            XCTAssertFalse(statements.contains { $0.hasPrefix("UPDATE lease SET owner") }, "nothing taken or released: \(statements)")
            let expires = try expiries(db)
            XCTAssertEqual(expires.count, n + 1)
            _ = db.take(touching: "lease")
            XCTAssertTrue(expires.values.allSatisfy { $0 == t0.timeIntervalSince1970 + 5 + 30 }, "every lease renewed by its length from the round")
            counts.append(statements.count)
        }
        XCTAssertEqual(counts[0], counts[1], "a round's statements do not depend on the leases held")
    }

    /// A lease another instance holds now (this one's lapsed and was taken) is not renewed by
    /// this instance's round, nor counted as held; the others are.
    func testALeaseTakenByAnotherInstanceIsNotRenewed() throws {
        let db = try open()
        let a = instance(1)
        var known = KnownLeases()
        XCTAssertEqual(try round(db, a, wants(5), at: 0, known: &known).held.sources.count, 5)
        let taken = LeaseBook.sourceLease("s3")
        try db.write { sql in
            try sql.execute("UPDATE lease SET owner = ?, expires_at = ? WHERE name = ?", "instance-2", self.t0.timeIntervalSince1970 + 40, taken)
        }
        let renewed = try db.write { try LeaseBook.renew($0, instance: a, now: self.t0.addingTimeInterval(5).timeIntervalSince1970) }
        XCTAssertEqual(renewed.count, 5, "four sources and the sink")
        XCTAssertFalse(renewed.contains(taken))
        let expires = try expiries(db)
        XCTAssertEqual(expires[taken], t0.timeIntervalSince1970 + 40, "the other instance's expiry is untouched")
        XCTAssertEqual(expires[LeaseBook.sourceLease("s0")], t0.timeIntervalSince1970 + 35)
        let owner: String? = try db.read { try $0.scalar("SELECT owner FROM lease WHERE name = ?", [.text(taken)]) }
        XCTAssertEqual(owner, "instance-2")
        // Fencing: a poll of the source by the instance that lost it records nothing.
        XCTAssertThrowsError(
            try db.write { try LeaseBook.check($0, name: taken, owner: a.id, now: self.t0.addingTimeInterval(6)) }
        ) { XCTAssertTrue($0 is LeaseLost, "\($0)") }
    }
}
