import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Leases on sources and sinks (DESIGN §11), round by round with a controlled clock.
final class LeaseTests: XCTestCase {
    var store: StateStore!
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    override func setUpWithError() throws {
        store = try makeTestStore()
    }

    func instance(_ n: Int) -> Instance { Instance(id: "instance-\(n)", host: "host\(n)", pid: Int32(1000 + n)) }

    func wants(_ sources: Int, sinks: [String] = ["hook"], length: TimeInterval = 2) -> LeaseWants {
        var w = LeaseWants()
        for i in 0..<sources { w.sources[LeaseBook.sourceLease(String(format: "s%03d", i))] = length }
        for s in sinks { w.sinks[LeaseBook.sinkLease(s)] = length }
        return w
    }

    /// One round of `instance` at `t` seconds after t0.
    @discardableResult
    func round(
        _ i: Instance, _ w: LeaseWants, at t: TimeInterval, liveWindow: TimeInterval = 1, grace: TimeInterval = 0.5,
        known: inout KnownLeases
    ) throws -> LeaseBook.Held {
        try store.database.write { db in
            try LeaseBook.round(db, instance: i, wants: w, liveWindow: liveWindow, grace: grace, now: self.t0.addingTimeInterval(t), known: &known)
        }
    }

    func testThreeInstancesShareThreeHundredSourcesWithoutOverlap() throws {
        let w = wants(300)
        var known = [KnownLeases](repeating: KnownLeases(), count: 3)
        let a = instance(1)
        let b = instance(2)
        let c = instance(3)
        XCTAssertEqual(try round(a, w, at: 0, known: &known[0]).sources.count, 300, "alone, it takes every source")
        // b joins: it finds nothing free; a gives up half at its next round; b takes them at its next.
        XCTAssertEqual(try round(b, w, at: 0.1, known: &known[1]).sources.count, 0)
        XCTAssertEqual(try round(a, w, at: 0.5, known: &known[0]).sources.count, 150)
        XCTAssertEqual(try round(b, w, at: 0.6, known: &known[1]).sources.count, 150)
        // c joins.
        try round(c, w, at: 0.7, known: &known[2])
        var held: [LeaseBook.Held] = []
        for t in [1.0, 1.5] {
            held = [
                try round(a, w, at: t, known: &known[0]), try round(b, w, at: t + 0.1, known: &known[1]),
                try round(c, w, at: t + 0.2, known: &known[2]),
            ]
        }
        XCTAssertEqual(held.map(\.sources.count), [100, 100, 100])
        XCTAssertEqual(held.map(\.live), [3, 3, 3])
        XCTAssertEqual(held[0].sources.union(held[1].sources).union(held[2].sources).count, 300, "every source has an owner")
        XCTAssertTrue(
            held[0].sources.isDisjoint(with: held[1].sources) && held[1].sources.isDisjoint(with: held[2].sources)
                && held[0].sources.isDisjoint(with: held[2].sources), "and only one")
        XCTAssertEqual(held.map(\.sinks.count).reduce(0, +), 1, "one instance delivers to the sink")
        let owners = try store.database.read { try LeaseBook.sourceOwners($0, now: self.t0.addingTimeInterval(1.8)) }
        XCTAssertEqual(owners.count, 300)
        XCTAssertEqual(Set(owners.values), ["host1:1001", "host2:1002", "host3:1003"])
    }

    /// Instances starting together on a fresh database each create the lease rows of every
    /// source in their first round. They must not deadlock on each other's uncommitted rows
    /// (they did on PostgreSQL, inserting in their own dictionary order: benchmark 5).
    func testInstancesStartingTogetherCreateTheLeasesWithoutDeadlock() throws {
        let n = 3000
        let store = self.store!
        let t0 = self.t0
        let errors = ErrorList()
        DispatchQueue.concurrentPerform(iterations: 3) { k in
            // Each its own dictionary, filled in its own order.
            var w = LeaseWants()
            for i in (0..<n).shuffled() { w.sources[LeaseBook.sourceLease(String(format: "s%04d", i))] = 2 }
            var known = KnownLeases()
            do {
                try store.database.write { db in
                    try LeaseBook.round(
                        db, instance: Instance(id: "instance-\(k)", host: "host\(k)", pid: Int32(k)), wants: w,
                        liveWindow: 1, grace: 0.5, now: t0, known: &known)
                }
            } catch {
                errors.append("\(error)")
            }
        }
        XCTAssertEqual(errors.all, [])
        XCTAssertEqual(try store.database.read { try $0.scalar("SELECT count(*) FROM lease WHERE name LIKE 'source:%'") } ?? 0, n)
    }

    /// kill -9: the instance stops renewing. Its leases expire after their length, and the
    /// others take them at once (expired leases are not subject to the fair share).
    func testADeadInstancesSourcesAreTakenOverWhenItsLeasesExpire() throws {
        let w = wants(300, length: 2)
        var known = [KnownLeases](repeating: KnownLeases(), count: 3)
        let insts = [instance(1), instance(2), instance(3)]
        var t = 0.0
        for _ in 0..<4 {
            for (i, inst) in insts.enumerated() { try round(inst, w, at: t, known: &known[i]) }
            t += 0.5
        }
        let dead = try round(insts[2], w, at: t, known: &known[2])
        XCTAssertEqual(dead.sources.count, 100)
        let killedAt = t
        var a = LeaseBook.Held()
        var b = LeaseBook.Held()
        for step in 1...6 {
            let now = killedAt + 0.5 * Double(step)
            a = try round(insts[0], w, at: now, known: &known[0])
            b = try round(insts[1], w, at: now + 0.05, known: &known[1])
            if now < killedAt + 2 {
                XCTAssertTrue(a.sources.union(b.sources).isDisjoint(with: dead.sources), "nobody takes a lease before it expires (t+\(now - killedAt))")
            }
            if step == 5 {
                XCTAssertEqual(a.sources.union(b.sources).count, 300, "within a round after the expiry, every source has an owner again")
                XCTAssertEqual([a.sources.count, b.sources.count], [150, 150], "split between the survivors, none taken to be given back")
            }
        }
        XCTAssertEqual(a.sources.union(b.sources).count, 300)
        XCTAssertTrue(a.sources.isDisjoint(with: b.sources))
        XCTAssertEqual([a.sources.count, b.sources.count], [150, 150], "and they share them evenly")
        XCTAssertEqual(a.live, 2)
    }

    /// Expired leases nobody with room took within a round are taken by anyone (a survivor
    /// that still counts the dead one as live, say): never left unpolled.
    func testExpiredLeasesLeftForARoundAreTakenRegardlessOfShare() throws {
        let w = wants(20, length: 2)
        var ka = KnownLeases()
        var kb = KnownLeases()
        try round(instance(1), w, at: 0, known: &ka)
        try round(instance(2), w, at: 0.1, known: &kb)
        try round(instance(1), w, at: 0.5, known: &ka)
        XCTAssertEqual(try round(instance(2), w, at: 0.6, known: &kb).sources.count, 10)
        // instance 2 dies at 0.6; instance 1 still counts it as live (a long live window).
        let early = try round(instance(1), w, at: 2.7, liveWindow: 100, known: &ka)
        XCTAssertEqual(early.sources.count, 10, "expired for less than a round, and no room in its share: left")
        let late = try round(instance(1), w, at: 3.2, liveWindow: 100, known: &ka)
        XCTAssertEqual(late.sources.count, 20, "expired for more than a round: taken")
    }

    /// A clean stop releases at once: the others need not wait for an expiry.
    func testACleanStopReleasesEveryLeaseAtOnce() throws {
        let w = wants(10)
        var ka = KnownLeases()
        var kb = KnownLeases()
        try round(instance(1), w, at: 0, known: &ka)
        try round(instance(2), w, at: 0.1, known: &kb)
        try round(instance(1), w, at: 0.2, known: &ka)
        XCTAssertEqual(try round(instance(2), w, at: 0.3, known: &kb).sources.count, 5)
        try store.database.write { try LeaseBook.releaseAll($0, instance: self.instance(1), now: self.t0.addingTimeInterval(0.4)) }
        let b = try round(instance(2), w, at: 0.5, known: &kb)
        XCTAssertEqual(b.sources.count, 10, "the stopped instance no longer counts, and its leases were free")
        XCTAssertEqual(b.live, 1)
    }

    /// A poll that outlived its lease records nothing: the new owner polls the source.
    func testAPollRecordedWithoutTheLeaseChangesNothing() throws {
        let source = SourceConfig(
            name: "s000", provider: "test", settings: SourceSettings(), flapWindow: 0, instance: ScriptedProvider(),
            file: "t", line: nil, configHash: "h")
        var known = KnownLeases()
        let w = wants(1)
        try round(instance(1), w, at: 0, known: &known)
        var options = RecordOptions(router: Router(routes: [], allSinks: ["hook"]))
        options.fence = instance(1).id
        let recorder = PollRecorder(store: store)
        // Within the lease: recorded (a baseline).
        XCTAssertEqual(
            try recorder.recordSuccess(
                source, result: .snapshot([Item(key: "a", kind: "k", title: "A")]), now: t0.addingTimeInterval(1),
                options: options
            ).baselineCount, 1)
        // Expired, and another instance took it.
        var other = KnownLeases()
        try round(instance(2), w, at: 3, known: &other)
        XCTAssertThrowsError(
            try recorder.recordSuccess(
                source, result: .snapshot([Item(key: "b", kind: "k", title: "B")]), now: t0.addingTimeInterval(3.1),
                options: options)
        ) { XCTAssertTrue($0 is LeaseLost, "\($0)") }
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM event") as Int?, 0, "no event")
        XCTAssertEqual(try store.column("SELECT key FROM item ORDER BY key") as [String], ["a"], "no item")
        options.fence = instance(2).id
        let taken = try recorder.recordSuccess(
            source, result: .snapshot([Item(key: "b", kind: "k", title: "B")]), now: t0.addingTimeInterval(3.2),
            options: options)
        XCTAssertEqual(Set(taken.events.map { "\($0.event.rawValue) \($0.key)" }), ["new b", "removed a"], "the new owner carries on from the state")
    }

    func testLeaseLengthsFollowIntervalAndTimeout() {
        // 2 s interval, 30 s timeout, rounds every 0.5 s: the interval bounds it.
        XCTAssertEqual(LeaseKeeper.leaseLength(interval: 2, timeout: 30, period: 0.5), 2)
        // 60 s interval, 10 s timeout, rounds every 10 s: 3 rounds beat timeout + 2 rounds.
        XCTAssertEqual(LeaseKeeper.leaseLength(interval: 60, timeout: 10, period: 10), 30)
        // 1 h interval, 30 s timeout, 10 s rounds: timeout + 2 rounds, long before the interval.
        XCTAssertEqual(LeaseKeeper.leaseLength(interval: 3600, timeout: 30, period: 10), 50)
        // Every lease + one round stays within 1.75 intervals when rounds are ≤ ¼ of the shortest interval.
        for (interval, timeout) in [(1.0, 30.0), (2, 1), (5, 60), (60, 30), (300, 10)] {
            let period = min(10, max(0.25, interval / 4))
            XCTAssertLessThanOrEqual(LeaseKeeper.leaseLength(interval: interval, timeout: timeout, period: period) + 2 * period, 2 * interval)
        }
    }
}

private final class ErrorList: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [String] = []
    func append(_ e: String) { lock.withLock { errors.append(e) } }
    var all: [String] { lock.withLock { errors } }
}
