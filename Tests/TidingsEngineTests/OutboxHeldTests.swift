import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `tidings outbox` on held deliveries (DESIGN §10): their status, when they go, and why.
final class OutboxHeldTests: XCTestCase {
    let utc = Zone.named("UTC")!
    let noon = Timestamp.parse("2026-11-23T12:00:00Z")!

    func testHoldReadsAsLocalTimeWithSecondsAndDateOnlyWhenNeeded() {
        let kolkata = Zone.named("Asia/Kolkata")!  // +05:30
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

    /// A silence added while rows are held keeps them back when their time comes (issue 20,
    /// item 6: they went out at the end of quiet hours, during the silence); the event is
    /// marked in history as silenced, and the silence counts it.
    func testASilenceAddedWhileRowsAreHeldKeepsThemBackAtRelease() async throws {
        let store = try polled(RouteAttention(groupWait: 5))
        let silence = try SilenceStore.add(
            store, matchers: [try SilenceMatcher(parsing: "key=a")], comment: "", createdBy: "me",
            now: noon.addingTimeInterval(1), until: noon.addingTimeInterval(3600))
        let mail = DigestRecordingSink(digests: true)
        let worker = OutboxWorker(
            store: store, sinks: ["mail": mail], policy: RetryPolicy(), env: FixedEnvironment(time: noon.addingTimeInterval(6)), logger: quietLogger)
        _ = await worker.drainOnce()
        XCTAssertEqual(mail.received.count, 0, "one event left: not a digest")
        XCTAssertEqual(mail.singles.count, 1)
        let silencedBy = Dictionary(
            try store.history(source: nil, limit: 10).compactMap { entry -> (String, String?)? in
                guard case .event(let e, let by) = entry, e.event == .new else { return nil }
                return (e.key, by)
            }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(silencedBy["a"], .some(silence.id))
        XCTAssertEqual(silencedBy["b"], .some(nil))
        XCTAssertEqual(try SilenceStore.all(store).first?.silenced, 1)
        XCTAssertEqual(try OutboxStore(store: store).entries(now: noon.addingTimeInterval(6)).count, 0)
    }

    /// A reload that takes `quiet_hours` or `group_wait` off a route releases what that rule
    /// held at once (issue 20, item 7: the rows waited for the old end, up to hours); quiet
    /// hours that still cover this moment keep them to the new end, if it is earlier.
    func testRowsHeldByARuleThatIsGoneAreReleasedAtOnce() async throws {
        let utc = Zone.named("UTC")!
        let night = QuietHours(start: .init("11:00")!, end: .init("18:00")!, timeZone: utc)
        for (now, routes, expected) in [
            (noon, [Route(sinks: ["mail"])], noon),  // quiet hours gone
            (noon, [] as [Route], noon),  // the route gone
            (noon, [Self.route(QuietHours(start: .init("11:00")!, end: .init("13:00")!, timeZone: utc))], noon.addingTimeInterval(3600)),
            (noon, [Self.route(QuietHours(start: .init("20:00")!, end: .init("23:00")!, timeZone: utc))], noon),  // not quiet now
            (noon, [Self.route(night)], noon.addingTimeInterval(6 * 3600)),  // unchanged: left alone
        ] {
            let store = try polled(RouteAttention(quietHours: night))
            let outbox = OutboxStore(store: store)
            XCTAssertEqual(try outbox.entries(now: noon).map(\.status), [.held, .held])
            _ = try await outbox.followRoutes(routes, now: now)
            XCTAssertEqual(try outbox.entries(now: now).compactMap(\.hold?.until), [expected, expected], "\(routes)")
        }
        let grouped = try polled(RouteAttention(groupWait: 300))
        let released = try await OutboxStore(store: grouped).followRoutes([Route(sinks: ["mail"])], now: noon.addingTimeInterval(1))
        XCTAssertEqual(released, 2)
        XCTAssertEqual(try OutboxStore(store: grouped).entries(now: noon.addingTimeInterval(1)).map(\.status), [.pending, .pending])
        let kept = try polled(RouteAttention(groupWait: 300))
        let unchanged = try await OutboxStore(store: kept).followRoutes([Self.route(groupWait: 300)], now: noon.addingTimeInterval(1))
        XCTAssertEqual(unchanged, 0)
    }

    static func route(_ quiet: QuietHours? = nil, groupWait: TimeInterval? = nil) -> Route {
        var r = Route(sinks: ["mail"])
        r.attention = RouteAttention(quietHours: quiet, groupWait: groupWait)
        return r
    }

    /// A held batch larger than one digest goes in parts, each with an id of its own (issue 20,
    /// item 3: the second part reused the first's, and a real Synapse dropped it as a retry),
    /// and a part's id is the same when it is retried.
    func testTheMessagesOfASplitDigestHaveTheirOwnStableIDs() async throws {
        let store = try makeTestStore()
        var settings = SourceSettings()
        settings.maxEvents = 100_000
        let source = SourceConfig(
            name: "s", provider: "scripted", settings: settings, flapWindow: 0, instance: ScriptedProvider(),
            file: "test", line: nil, configHash: "h1")
        var route = Route(sinks: ["mail"])
        route.attention = RouteAttention(groupWait: 5)
        let options = RecordOptions(router: Router(routes: [route], allSinks: ["mail"]))
        _ = try await PollRecorder(store: store).recordSuccess(source, result: .snapshot([]), now: noon.addingTimeInterval(-1), options: options)
        let limit = 100  // the parts of a 10,000-row digest, in miniature
        let n = 2 * limit + 50
        let items = (1...n).map { Item(key: "k\($0)", kind: "alert", title: "T\($0)") }
        _ = try await PollRecorder(store: store).recordSuccess(source, result: .snapshot(items), now: noon, options: options)

        // The first part is refused once (a lost answer), then goes; so does the second.
        let mail = FlakyDigestSink(failFirst: 1)
        let env = FixedEnvironment(time: noon.addingTimeInterval(6))
        let worker = OutboxWorker(
            store: store, sinks: ["mail": mail], policy: RetryPolicy(), env: env, logger: quietLogger,
            leases: nil, digestLimit: limit)
        _ = await worker.drainOnce()
        env.time = noon.addingTimeInterval(60)  // past the retry's backoff
        _ = await worker.drainOnce()
        let tries = mail.tries
        XCTAssertEqual(tries.map(\.count), [limit, limit, limit, 50])
        XCTAssertEqual(tries[0].id, tries[1].id, "a retried part keeps its id")
        XCTAssertNotEqual(tries[1].id, tries[2].id, "each part has its own id")
        XCTAssertEqual(Set(tries[1...].flatMap(\.events)).count, n, "every event delivered once")
        XCTAssertEqual(try OutboxStore(store: store).entries(now: env.time).count, 0)
    }
}

/// Records each digest it is given (id, count, event ids); refuses the first `failFirst` as
/// retryable, as a lost answer would be.
final class FlakyDigestSink: Sink, @unchecked Sendable {
    struct Try {
        var id: String
        var count: Int
        var events: [String]
    }
    let lock = NSLock()
    private var failures: Int
    private var log: [Try] = []
    init(failFirst: Int) { failures = failFirst }
    var tries: [Try] { lock.withLock { log } }
    var rendersDigests: Bool { true }
    func deliver(_ events: [Event]) async throws { XCTFail("held rows go as digests") }
    func deliverDigest(_ digest: Digest) async throws {
        try lock.withLock {
            log.append(Try(id: digest.id, count: digest.events.count, events: digest.events.map(\.id)))
            if failures > 0 {
                failures -= 1
                throw DeliveryError(.retryable, "answer lost")
            }
        }
    }
}
