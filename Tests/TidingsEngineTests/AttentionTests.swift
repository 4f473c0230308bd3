import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// A sink that renders digests and records what it got: single events and digests apart.
final class DigestRecordingSink: Sink, @unchecked Sendable {
    let lock = NSLock()
    let digests: Bool
    var singles: [[String]] = []
    var received: [Digest] = []
    init(digests: Bool) { self.digests = digests }
    var rendersDigests: Bool { digests }
    func deliver(_ events: [Event]) async throws { lock.withLock { singles.append(events.map(\.id)) } }
    func deliverDigest(_ digest: Digest) async throws { lock.withLock { received.append(digest) } }
}

final class QuietHoursTests: XCTestCase {
    let utc = Zone.named("UTC")!
    /// 2026-11-23 is a Monday.
    func at(_ text: String) -> Date { Timestamp.parse(text)! }

    func testOvernightWindowEndsNextMorning() {
        let q = QuietHours(start: .init("22:00")!, end: .init("07:00")!, timeZone: utc)
        XCTAssertEqual(q.end(ofWindowContaining: at("2026-11-23T23:30:00Z")), at("2026-11-24T07:00:00Z"))
        XCTAssertEqual(q.end(ofWindowContaining: at("2026-11-24T06:59:59Z")), at("2026-11-24T07:00:00Z"))
        XCTAssertEqual(q.end(ofWindowContaining: at("2026-11-23T22:00:00Z")), at("2026-11-24T07:00:00Z"), "start is inside")
        XCTAssertNil(q.end(ofWindowContaining: at("2026-11-24T07:00:00Z")), "end is outside")
        XCTAssertNil(q.end(ofWindowContaining: at("2026-11-23T12:00:00Z")))
    }

    func testDaysNameTheDayTheWindowStarts() {
        // Friday nights only: Saturday 03:00 is inside (the window started Friday), Friday 03:00 is not.
        let q = QuietHours(start: .init("22:00")!, end: .init("07:00")!, days: [6], timeZone: utc)
        XCTAssertEqual(q.end(ofWindowContaining: at("2026-11-28T03:00:00Z")), at("2026-11-28T07:00:00Z"))
        XCTAssertNil(q.end(ofWindowContaining: at("2026-11-27T03:00:00Z")))
        XCTAssertNotNil(q.end(ofWindowContaining: at("2026-11-27T23:00:00Z")))
    }

    func testSameDayWindowAndSecondsAndZones() {
        let stockholm = Zone.named("Europe/Stockholm")!
        let q = QuietHours(start: .init("12:00:05")!, end: .init("12:00:10")!, timeZone: stockholm)
        // 11:00:07Z is 12:00:07 in Stockholm (UTC+1 in November).
        XCTAssertEqual(q.end(ofWindowContaining: at("2026-11-23T11:00:07Z")), at("2026-11-23T11:00:10Z"))
        XCTAssertNil(q.end(ofWindowContaining: at("2026-11-23T12:00:07Z")))
        XCTAssertNil(QuietHours.TimeOfDay("24:00"))
        XCTAssertNil(QuietHours.TimeOfDay("7:00"))
        XCTAssertEqual(QuietHours.TimeOfDay("07:30")?.description, "07:30")
    }

    func testConfigErrorsNameTheLine() throws {
        let base = """
            [sinks.out]
            type = "stdout"
            [[routes]]
            sinks = ["out"]

            """
        XCTAssertThrowsError(try loadConfig(base + #"quiet_hours = { start = "25:00", end = "07:00" }"#)) { e in
            XCTAssertTrue("\(e)".contains("tidings.toml:5:"), "\(e)")
            XCTAssertTrue("\(e)".contains("time of day"), "\(e)")
        }
        for zone in ["Mars/Olympus", "../../../etc/localtime", "/usr/share/zoneinfo/UTC", "Europe"] {
            XCTAssertThrowsError(try loadConfig(base + #"quiet_hours = { start = "22:00", end = "07:00", timezone = "\#(zone)" }"#)) { e in
                XCTAssertTrue("\(e)".contains("tidings.toml:5:"), "\(e)")
                XCTAssertTrue("\(e)".contains("unknown time zone '\(zone)'"), "\(e)")
            }
        }
        XCTAssertThrowsError(try loadConfig(base + #"quiet_hours = { start = "22:00", end = "07:00", days = ["someday"] }"#)) { e in
            XCTAssertTrue("\(e)".contains("unknown day 'someday'"), "\(e)")
        }
        XCTAssertThrowsError(try loadConfig(base + #"quiet_bypass = "urgent""#)) { e in XCTAssertTrue("\(e)".contains("unknown severity"), "\(e)") }
        let ok = try loadConfig(
            base + """
                quiet_hours = { start = "22:00", end = "07:00", days = ["mon", "Friday"], timezone = "Europe/Stockholm" }
                quiet_bypass = "critical"
                group_wait = "30s"
                """)
        let a = ok.routes[0].attention
        XCTAssertEqual(a.quietHours?.days, [2, 6])
        XCTAssertEqual(a.quietBypass, .critical)
        XCTAssertEqual(a.groupWait, 30)
    }
}

final class HoldAndDigestTests: XCTestCase {
    var store: StateStore!
    let provider = ScriptedProvider()
    lazy var source = SourceConfig(
        name: "s", provider: "scripted", settings: SourceSettings(), flapWindow: 0, instance: provider,
        file: "test", line: nil, configHash: "h1")
    let t0 = Timestamp.parse("2026-11-23T23:00:00Z")!
    let quiet = QuietHours(start: .init("22:00")!, end: .init("07:00")!, timeZone: Zone.named("UTC")!)

    override func setUpWithError() throws {
        store = try makeTestStore()
    }

    func router(_ attention: RouteAttention, sinks: [String] = ["mail", "hook"]) -> RecordOptions {
        var route = Route(sinks: sinks)
        route.attention = attention
        return RecordOptions(router: Router(routes: [route], allSinks: sinks))
    }

    func item(_ key: String, _ severity: Severity = .warning) -> Item {
        var i = Item(key: key, kind: "alert", title: "item \(key)")
        i.severity = severity
        return i
    }

    /// Baseline, then one poll per list of items.
    func poll(_ polls: [[Item]], options: RecordOptions, at times: [Date]) throws {
        _ = try PollRecorder(store: store).recordSuccess(source, result: .snapshot([]), now: times[0].addingTimeInterval(-1), options: options)
        for (items, t) in zip(polls, times) {
            _ = try PollRecorder(store: store).recordSuccess(source, result: .snapshot(items), now: t, options: options)
        }
    }

    func testRouterHoldsInQuietHoursUnlessBypassed() {
        var route = Route(sinks: ["a"])
        route.attention = RouteAttention(quietHours: quiet, quietBypass: .critical)
        let router = Router(routes: [route], allSinks: ["a"])
        var e = Event(
            id: "1", source: "s", provider: "p", kind: "k", event: .new, key: "k", title: "t", body: "", url: nil,
            severity: .warning, observedAt: t0, data: .object([:]))
        XCTAssertEqual(
            router.decisions(for: e, at: t0), [RouteDecision(sink: "a", hold: .quietHours(until: Timestamp.parse("2026-11-24T07:00:00Z")!, route: 0))])
        XCTAssertEqual(router.decisions(for: e, at: t0.addingTimeInterval(10 * 3600)), [RouteDecision(sink: "a", hold: nil)], "after the window")
        e.severity = .critical
        XCTAssertEqual(router.decisions(for: e, at: t0), [RouteDecision(sink: "a", hold: nil)], "critical bypasses")
        XCTAssertEqual(router.sinks(for: e), ["a"])
    }

    func testHeldRowsWaitAndGoAsOneDigestPerSinkWhenTheWindowEnds() async throws {
        let options = router(RouteAttention(quietHours: quiet, quietBypass: .critical))
        // Three polls inside the window: a, b, then c critical; d came and went.
        try poll(
            [[item("a")], [item("a"), item("b"), item("d")], [item("a"), item("b"), item("c", .critical)]], options: options,
            at: [t0, t0.addingTimeInterval(60), t0.addingTimeInterval(120)])
        let env = FixedEnvironment(time: t0.addingTimeInterval(180))
        let mail = DigestRecordingSink(digests: true)
        let hook = DigestRecordingSink(digests: false)
        let worker = OutboxWorker(store: store, sinks: ["mail": mail, "hook": hook], policy: RetryPolicy(), env: env, logger: quietLogger)
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.singles.count, 1, "only the critical event went at once")
        XCTAssertEqual(hook.singles.count, 1)
        XCTAssertTrue(mail.received.isEmpty)
        let backlog = try OutboxStore(store: store).backlog(now: env.time)
        XCTAssertEqual(backlog["mail"], OutboxBacklog(pending: 0, held: 4, dead: 0))
        let release = try await OutboxStore(store: store).nextRelease(sink: "mail")
        XCTAssertEqual(release, Timestamp.parse("2026-11-24T07:00:00Z"))

        env.time = Timestamp.parse("2026-11-24T07:00:00Z")!
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.received.count, 1, "one digest")
        let digest = try XCTUnwrap(mail.received.first)
        XCTAssertEqual(digest.reason, .quietHours)
        XCTAssertEqual(digest.events.map(\.key), ["a", "b", "d", "d"])
        XCTAssertEqual(digest.entries.map(\.summaryText), ["new", "new", "came and went"])
        XCTAssertEqual(hook.singles.count, 1 + 4, "a sink without digests gets them one by one")
        XCTAssertEqual(try OutboxStore(store: store).backlog(now: env.time), [:])
    }

    func testGroupWaitCollectsFromTheFirstEventThenOneDigest() async throws {
        let options = router(RouteAttention(groupWait: 30), sinks: ["mail"])
        let noon = Timestamp.parse("2026-11-23T12:00:00Z")!
        try poll(
            [(1...20).map { item("\($0)") }, (1...21).map { item("\($0)") }, (1...22).map { item("\($0)") }], options: options,
            at: [noon, noon.addingTimeInterval(10), noon.addingTimeInterval(40)])
        let env = FixedEnvironment(time: noon.addingTimeInterval(29))
        let mail = DigestRecordingSink(digests: true)
        let worker = OutboxWorker(store: store, sinks: ["mail": mail], policy: RetryPolicy(), env: env, logger: quietLogger)
        _ = await worker.drainOnce()
        XCTAssertTrue(mail.received.isEmpty && mail.singles.isEmpty, "still collecting")
        env.time = noon.addingTimeInterval(30)
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.received.map(\.events.count), [21], "the 20 of the first poll and the one 10 s later")
        XCTAssertEqual(mail.received[0].reason, .grouped)
        env.time = noon.addingTimeInterval(70)
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.received.count, 1, "the event at +40 s opened a new group, a single event is sent as itself")
        XCTAssertEqual(mail.singles.count, 1)
    }

    func testADigestThatFailsIsRetriedWholeWithTheSameID() async throws {
        let options = router(RouteAttention(groupWait: 5), sinks: ["mail"])
        let noon = Timestamp.parse("2026-11-23T12:00:00Z")!
        try poll([[item("a"), item("b")]], options: options, at: [noon])
        final class Flaky: Sink, @unchecked Sendable {
            var ids: [String] = []
            var rendersDigests: Bool { true }
            func deliver(_ events: [Event]) async throws { XCTFail("no single deliveries") }
            func deliverDigest(_ d: Digest) async throws {
                ids.append(d.id)
                if ids.count == 1 { throw DeliveryError(.retryable, "HTTP 503") }
            }
        }
        let sink = Flaky()
        let env = FixedEnvironment(time: noon.addingTimeInterval(6))
        let worker = OutboxWorker(
            store: store, sinks: ["mail": sink], policy: RetryPolicy(first: 1, cap: 1, jitter: 0, maxAge: 100), env: env, logger: quietLogger)
        _ = await worker.drainOnce()
        env.time = noon.addingTimeInterval(8)
        _ = await worker.drainOnce()
        XCTAssertEqual(sink.ids.count, 2)
        XCTAssertEqual(sink.ids[0], sink.ids[1])
        XCTAssertEqual(try OutboxStore(store: store).backlog(now: env.time), [:])
    }
}
