import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class RoutingTests: XCTestCase {
    func event(source: String = "helpdesk", severity: Severity = .critical, type: EventType = .new, kind: String = "alert") -> Event {
        Event(source: source, provider: "alertmanager", kind: kind, event: type, key: "k", title: "t", severity: severity, observedAt: Date())
    }

    func testNoRoutesMeansEverySink() {
        XCTAssertEqual(Router(routes: [], allSinks: ["a", "b"]).sinks(for: event()), ["a", "b"])
    }

    func testFirstMatchWinsUnlessContinue() {
        let routes = [
            Route(source: ["helpdesk"], severity: ["critical", "warning"], sinks: ["ops", "desktop"]),
            Route(sinks: ["desktop"]),
        ]
        let r = Router(routes: routes, allSinks: ["ops", "desktop", "log"])
        XCTAssertEqual(r.sinks(for: event()), ["ops", "desktop"])
        XCTAssertEqual(r.sinks(for: event(severity: .info)), ["desktop"])
        XCTAssertEqual(r.sinks(for: event(source: "other")), ["desktop"])

        let cont = Router(
            routes: [Route(kind: ["alert"], sinks: ["log"], continueMatching: true), Route(event: ["new"], sinks: ["ops", "log"])],
            allSinks: ["ops", "log"])
        XCTAssertEqual(cont.sinks(for: event()), ["log", "ops"])
        XCTAssertEqual(cont.sinks(for: event(type: .removed)), ["log"])
    }

    func testNoMatchGoesNowhere() {
        let r = Router(routes: [Route(source: ["x"], sinks: ["a"])], allSinks: ["a"])
        XCTAssertEqual(r.sinks(for: event()), [])
    }
}

final class BackoffTests: XCTestCase {
    func testJitterBounds() {
        XCTAssertEqual(Backoff.jittered(100, jitter: 0.1, unit: 0), 90, accuracy: 1e-9)
        XCTAssertEqual(Backoff.jittered(100, jitter: 0.1, unit: 0.5), 100, accuracy: 1e-9)
        XCTAssertEqual(Backoff.jittered(100, jitter: 0.1, unit: 0.999999), 110, accuracy: 1e-3)
    }

    func testFailureBackoffDoublesAndCaps() {
        func wait(_ k: Int, retryAfter: Double? = nil) -> Double {
            Backoff.afterFailure(interval: 60, failures: k, maxBackoff: 3600, jitter: 0, unit: 0.5, retryAfter: retryAfter)
        }
        XCTAssertEqual(wait(1), 120)
        XCTAssertEqual(wait(2), 240)
        XCTAssertEqual(wait(5), 1920)
        XCTAssertEqual(wait(6), 3600)
        XCTAssertEqual(wait(60), 3600)
        XCTAssertEqual(wait(1, retryAfter: 900), 900, "Retry-After is never undercut")
        XCTAssertEqual(wait(6, retryAfter: 7200), 7200, "even beyond max_backoff")
    }

    func testRetryPolicy() {
        let p = RetryPolicy(first: 2, cap: 600, jitter: 0)
        XCTAssertEqual(p.delay(afterAttempts: 1, unit: 0.5), 2)
        XCTAssertEqual(p.delay(afterAttempts: 2, unit: 0.5), 4)
        XCTAssertEqual(p.delay(afterAttempts: 20, unit: 0.5), 600)
        XCTAssertEqual(p.delay(afterAttempts: 1, unit: 0.5, retryAfter: 30), 30)
    }

    func testSpreadWindowGrowsWithSourcesButNotBeyondInterval() {
        XCTAssertEqual(Backoff.spreadWindow(count: 3, interval: 300), 2)
        XCTAssertEqual(Backoff.spreadWindow(count: 10_000, interval: 60), 60)
        XCTAssertEqual(Backoff.spreadWindow(count: 1000, interval: 300), 10)
    }
}
