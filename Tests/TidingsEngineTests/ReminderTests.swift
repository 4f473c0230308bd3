import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `repeat_interval` reminders (DESIGN §10), with explicit poll times.
final class ReminderTests: XCTestCase {
    var store: StateStore!
    var recorder: PollRecorder!
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    lazy var source = SourceConfig(
        name: "s", provider: "scripted", settings: SourceSettings(), flapWindow: 0, instance: ScriptedProvider(),
        file: "test", line: nil, configHash: "h1")

    override func setUpWithError() throws {
        store = try makeTestStore()
        recorder = PollRecorder(store: store)
    }

    func route(sinks: [String], every interval: TimeInterval?, severity: [String]? = nil, event: [String]? = nil, continueMatching: Bool = false) -> Route {
        var r = Route(severity: severity, event: event, sinks: sinks, continueMatching: continueMatching)
        r.attention.repeatInterval = interval
        return r
    }

    func warning(_ key: String, title: String? = nil, severity: Severity = .warning) -> Item {
        Item(key: key, kind: "alert", title: title ?? "disk \(key) full", body: "95% used", url: "https://example.org/\(key)", severity: severity)
    }

    /// One poll at `t0 + offset` with these items; the events it produced.
    @discardableResult
    func poll(_ items: [Item], at offset: TimeInterval, routes: [Route], options: ((inout RecordOptions) -> Void)? = nil) throws -> [Event] {
        var o = RecordOptions(router: Router(routes: routes, allSinks: ["a", "b"]))
        options?(&o)
        return try recorder.recordSuccess(source, result: .snapshot(items), now: t0 + offset, options: o).events
    }

    func reminders(_ events: [Event]) -> [Event] { events.filter { $0.event == .reminder } }

    /// The sinks each event was queued for.
    func sinks(_ event: Event) throws -> [String] {
        try store.column("SELECT sink FROM delivery JOIN event ON event.seq = delivery.event_seq WHERE event.id = ? ORDER BY sink", event.id)
    }

    func testAReminderComesOnceTheIntervalPassedNotBefore() throws {
        let routes = [route(sinks: ["a"], every: 60)]
        try poll([warning("1")], at: 0, routes: routes)  // baseline: present since t0
        XCTAssertEqual(reminders(try poll([warning("1")], at: 30, routes: routes)), [])
        XCTAssertEqual(reminders(try poll([warning("1")], at: 59, routes: routes)), [])
        let due = reminders(try poll([warning("1")], at: 61, routes: routes))
        XCTAssertEqual(due.count, 1)
        let r = try XCTUnwrap(due.first)
        XCTAssertEqual(r.key, "1")
        XCTAssertEqual(r.title, "disk 1 full", "the item's own title")
        XCTAssertEqual(r.url, "https://example.org/1")
        XCTAssertEqual(r.severity, .warning)
        XCTAssertEqual(r.data["since"]?.stringValue, Timestamp.format(t0))
        XCTAssertEqual(r.data["reminder_count"], .number(1))
        XCTAssertTrue(r.body.hasPrefix("Still present since \(Timestamp.format(t0)) (for 1m1s; reminder 1).\n95% used"), r.body)
        XCTAssertEqual(try sinks(r), ["a"])
        XCTAssertTrue(r.jsonLine().contains(#""event":"reminder""#))
        // The next one an interval after the last reminder, not after the item's appearance.
        XCTAssertEqual(reminders(try poll([warning("1")], at: 100, routes: routes)), [])
        let second = reminders(try poll([warning("1")], at: 121, routes: routes))
        XCTAssertEqual(second.map { $0.data["reminder_count"] }, [.number(2)])
    }

    func testEachRouteRemindsAtItsOwnIntervalThroughItsOwnSinks() throws {
        let routes = [route(sinks: ["a"], every: 60, continueMatching: true), route(sinks: ["b"], every: 150)]
        try poll([warning("1")], at: 0, routes: routes)
        let first = reminders(try poll([warning("1")], at: 60, routes: routes))
        XCTAssertEqual(try first.map(sinks), [["a"]], "only the route whose interval passed")
        let second = reminders(try poll([warning("1")], at: 120, routes: routes))
        XCTAssertEqual(try second.map(sinks), [["a"]])
        let both = reminders(try poll([warning("1")], at: 180, routes: routes))
        XCTAssertEqual(try both.map(sinks), [["a", "b"]], "one event through both routes")
        XCTAssertEqual(both.first?.data["reminder_count"], .number(3), "the how-manieth, counted per route, the highest")
    }

    func testNoReminderForInfoItemsOrThroughRoutesWithoutAnInterval() throws {
        let routes = [route(sinks: ["a"], every: nil, severity: ["critical"]), route(sinks: ["b"], every: 60)]
        let items = [warning("info", severity: .info), warning("crit", severity: .critical), warning("warn")]
        try poll(items, at: 0, routes: routes)
        let due = reminders(try poll(items, at: 60, routes: routes))
        // The critical item's events go through the first route (first match wins), which has no interval.
        XCTAssertEqual(due.map(\.key), ["warn"])
        XCTAssertEqual(try due.map(sinks), [["b"]])
    }

    func testARemovedItemIsNotRemindedOfAndStartsAfreshWhenItReturns() throws {
        let routes = [route(sinks: ["a"], every: 60)]
        try poll([warning("1")], at: 0, routes: routes)
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes)).count, 1)
        let gone = try poll([], at: 90, routes: routes)
        XCTAssertEqual(gone.map(\.event), [.removed])
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM reminder") as Int?, 0, "its rows went with it")
        XCTAssertEqual(reminders(try poll([], at: 200, routes: routes)), [])
        XCTAssertEqual(try poll([warning("1")], at: 210, routes: routes).map(\.event), [.new])
        XCTAssertEqual(reminders(try poll([warning("1")], at: 260, routes: routes)), [], "an interval after it returned, not after the old reminder")
        let again = reminders(try poll([warning("1")], at: 270, routes: routes))
        XCTAssertEqual(again.map { $0.data["reminder_count"] }, [.number(1)])
        XCTAssertEqual(again.first?.data["since"]?.stringValue, Timestamp.format(t0 + 210))
    }

    func testAChangeRestartsTheIntervalAndIsNotAlsoAReminder() throws {
        let routes = [route(sinks: ["a"], every: 60)]
        try poll([warning("1")], at: 0, routes: routes)
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes)).count, 1)
        let changed = try poll([warning("1", title: "disk 1 fuller")], at: 120, routes: routes)
        XCTAssertEqual(changed.map(\.event), [.changed], "the change, no reminder beside it")
        XCTAssertEqual(reminders(try poll([warning("1", title: "disk 1 fuller")], at: 170, routes: routes)), [])
        let after = reminders(try poll([warning("1", title: "disk 1 fuller")], at: 180, routes: routes))
        XCTAssertEqual(after.map(\.title), ["disk 1 fuller"])
        XCTAssertEqual(after.first?.data["reminder_count"], .number(1), "counted again from the change")
    }

    func testWhenARemindedWasSentSurvivesARestartAndAReload() throws {
        try poll([warning("1")], at: 0, routes: [route(sinks: ["a"], every: 60)])
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: [route(sinks: ["a"], every: 60)])).count, 1)
        // Another process, another route order and interval: the same route by its match and sinks.
        store = try reopenTestStore(store)
        recorder = PollRecorder(store: store)
        let reloaded = [route(sinks: ["b"], every: nil, severity: ["critical"]), route(sinks: ["a"], every: 90)]
        XCTAssertEqual(reminders(try poll([warning("1")], at: 140, routes: reloaded)), [], "90 s after the last reminder, not after the item's appearance")
        XCTAssertEqual(reminders(try poll([warning("1")], at: 150, routes: reloaded)).count, 1)
    }

    func testARouteMatchingNewOrChangedEventsReminds() throws {
        let routes = [route(sinks: ["a"], every: 60, event: ["new"], continueMatching: true), route(sinks: ["b"], every: 60, event: ["removed"])]
        XCTAssertTrue(routes[0].canRemind)
        XCTAssertFalse(routes[1].canRemind)
        try poll([warning("1")], at: 0, routes: routes)
        XCTAssertEqual(try reminders(try poll([warning("1")], at: 60, routes: routes)).map(sinks), [["a"]])
    }

    func testOnlyPollsThatRouteAndCountRemind() throws {
        let routes = [route(sinks: ["a"], every: 60)]
        try poll([warning("1")], at: 0, routes: routes)
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes) { $0.dryRun = true }), [], "check --dry-run")
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes) { $0.router = nil }), [], "check without --deliver")
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes) { $0.accounting = .uncounted }), [], "a poll on request")
        XCTAssertEqual(reminders(try poll([warning("1")], at: 60, routes: routes)).count, 1, "none of those took the reminder")
    }

    func testANotModifiedPollStillReminds() throws {
        let routes = [route(sinks: ["a"], every: 60)]
        try poll([warning("1")], at: 0, routes: routes)
        let events = try recorder.recordSuccess(
            source, result: .notModified, now: t0 + 60, options: RecordOptions(router: Router(routes: routes, allSinks: ["a"]))
        ).events
        XCTAssertEqual(events.map(\.event), [.reminder])
    }

    func testMoreRemindersThanMaxEventsAreOneSummary() throws {
        source.settings.maxEvents = 2
        let routes = [route(sinks: ["a"], every: 60)]
        let items = (1...3).map { warning("\($0)") }
        try poll(items, at: 0, routes: routes)
        let due = try poll(items, at: 60, routes: routes)
        XCTAssertEqual(due.count, 1)
        XCTAssertEqual(due.first?.event, .reminder)
        XCTAssertTrue(due.first?.title.contains("3 events in one poll (3 reminder)") ?? false, due.first?.title ?? "")
        XCTAssertEqual(try sinks(due[0]), ["a"])
        XCTAssertEqual(try poll(items, at: 61, routes: routes), [], "all three taken: the next an interval later")
    }

    func testARemindersDeliveryIsHeldLikeAnyOtherByItsRoutesGroupWait() throws {
        var grouped = route(sinks: ["a"], every: 60)
        grouped.attention.groupWait = 30
        try poll([warning("1")], at: 0, routes: [grouped])
        let due = reminders(try poll([warning("1")], at: 60, routes: [grouped]))
        let hold: [String] = try store.column("SELECT hold FROM delivery JOIN event ON event.seq = delivery.event_seq WHERE event.id = ?", due[0].id)
        XCTAssertEqual(hold, [Digest.Reason.grouped.rawValue])
    }

    func testRouteIdentityIsWhatItMatchesAndWhereItSends() {
        var a = route(sinks: ["a"], every: 60, severity: ["warning"])
        let id = a.identity
        a.attention.repeatInterval = 3600
        a.continueMatching = true
        XCTAssertEqual(a.identity, id, "timing and continue are not part of it")
        XCTAssertNotEqual(route(sinks: ["b"], every: 60, severity: ["warning"]).identity, id)
        XCTAssertNotEqual(route(sinks: ["a"], every: 60, severity: ["critical"]).identity, id)
        XCTAssertNotEqual(route(sinks: ["a"], every: 60).identity, id)
        XCTAssertNotEqual(Route(kind: ["warning"], sinks: ["a"]).identity, id, "the same values under another key")
    }

    func testRepeatIntervalIsParsedAndOneThatCannotRemindIsWarned() throws {
        let c = try loadConfig(
            """
            [sinks.out]
            type = "stdout"
            [[routes]]
            match = { event = ["removed"] }
            sinks = ["out"]
            repeat_interval = "2s"
            [[routes]]
            sinks = ["out"]
            repeat_interval = "4h"
            [sources.api]
            provider = "http-json"
            url = "http://127.0.0.1:9/items"
            """)
        XCTAssertEqual(c.routes.map(\.attention.repeatInterval), [2, 14_400])
        XCTAssertEqual(c.warnings.count, 1, "\(c.warnings)")
        XCTAssertTrue(c.warnings.first?.contains("tidings.toml:6: route #1: 'repeat_interval' has no effect") ?? false, "\(c.warnings)")
        let errors = try configErrors("[sinks.out]\ntype = \"stdout\"\n[[routes]]\nsinks = [\"out\"]\nrepeat_interval = \"500ms\"\n")
        XCTAssertTrue(errors.map(\.description).contains { $0.contains("tidings.toml:5: route #1: 'repeat_interval' must be at least 1s") }, "\(errors)")
    }
}
