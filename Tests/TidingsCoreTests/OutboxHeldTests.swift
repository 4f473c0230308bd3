import Foundation
@testable import TidingsCore
import XCTest

/// `tidings outbox` on held deliveries (DESIGN §10): their status, when they go, and why.
final class OutboxHeldTests: XCTestCase {
    let utc = TimeZone(identifier: "UTC")!
    let noon = Timestamp.parse("2026-11-23T12:00:00Z")!

    func testHoldReadsAsLocalTimeWithSecondsAndDateOnlyWhenNeeded() {
        let kolkata = TimeZone(identifier: "Asia/Kolkata")!  // +05:30
        let seven = Timestamp.parse("2026-11-24T07:00:00Z")!
        let quiet = OutboxEntry.Hold(until: seven, reason: .quietHours)
        XCTAssertEqual(quiet.description(now: seven.addingTimeInterval(-3600), timeZone: utc), "held until 07:00 (quiet hours)")
        XCTAssertEqual(quiet.description(now: noon, timeZone: utc), "held until 2026-11-24 07:00 (quiet hours)", "not today: with the date")
        XCTAssertEqual(quiet.description(now: seven.addingTimeInterval(-3600), timeZone: kolkata), "held until 12:30 (quiet hours)")
        let group = OutboxEntry.Hold(until: noon.addingTimeInterval(5), reason: .grouped)
        XCTAssertEqual(group.description(now: noon, timeZone: utc), "grouping until 12:00:05")
    }

    /// A store after a baseline and one poll of items a and b, routed to sink `mail` by a route
    /// with `attention`.
    func polled(_ attention: RouteAttention) throws -> StateStore {
        let store = try makeTestStore()
        let source = SourceConfig(
            name: "s", provider: "scripted", settings: SourceSettings(), flapWindow: 0, instance: ScriptedProvider(),
            file: "test", line: nil, configHash: "h1")
        var route = Route(sinks: ["mail"])
        route.attention = attention
        let options = RecordOptions(router: Router(routes: [route], allSinks: ["mail"]))
        _ = try PollRecorder(store: store).recordSuccess(source, result: .snapshot([]), now: noon.addingTimeInterval(-1), options: options)
        _ = try PollRecorder(store: store).recordSuccess(
            source, result: .snapshot([Item(key: "a", kind: "alert", title: "A"), Item(key: "b", kind: "alert", title: "B")]), now: noon, options: options)
        return store
    }

    /// A sink that renders digests still gets a poll's events that were not held one by one:
    /// a refused one (an SMTP 554) must not make the rest of its poll dead letters too.
    func testADigestSinkGetsEventsThatWereNotHeldOneByOne() async throws {
        let store = try polled(RouteAttention())
        let mail = DigestRecordingSink(digests: true)
        let worker = OutboxWorker(store: store, sinks: ["mail": mail], policy: RetryPolicy(), env: FixedEnvironment(time: noon), logger: quietLogger)
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.singles.map(\.count), [1, 1])
        XCTAssertTrue(mail.received.isEmpty)
    }

    func testHeldRowsAreHeldUntilTheirTimeThenPending() throws {
        let store = try polled(RouteAttention(groupWait: 5))
        let outbox = OutboxStore(store: store)
        let held = try outbox.entries(now: noon.addingTimeInterval(1))
        XCTAssertEqual(held.map(\.status), [.held, .held])
        XCTAssertEqual(held[0].hold, OutboxEntry.Hold(until: noon.addingTimeInterval(5), reason: .grouped))
        XCTAssertEqual(held[0].nextAttempt, noon.addingTimeInterval(5), "it is tried when the hold ends")
        XCTAssertEqual(held[0].json["held_until"]?.stringValue, "2026-11-23T12:00:05Z")
        XCTAssertEqual(held[0].json["hold"]?.stringValue, "group")
        XCTAssertEqual(held[0].json["status"]?.stringValue, "held")

        let due = try outbox.entries(now: noon.addingTimeInterval(5))
        XCTAssertEqual(due.map(\.status), [.pending, .pending], "the group has closed: due now")
        XCTAssertEqual(due[0].json["hold"]?.stringValue, "group", "still says it was held (it goes as part of a digest)")
    }
}
