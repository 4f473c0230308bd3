import Foundation
import Synchronization
import TidingsMonitoring
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `[http]` (DESIGN §8): its configuration, its routes, and the metrics it exports.
final class MonitoringTests: XCTestCase {
    // MARK: [http] in the config

    func testListenTakesIPv4AndBracketedIPv6() throws {
        XCTAssertNil(try loadConfig("").http)
        let v4 = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\n")
        XCTAssertEqual(v4.http?.listen, ListenAddress("127.0.0.1:9464"))
        XCTAssertEqual(v4.http?.listen.description, "127.0.0.1:9464")
        XCTAssertTrue(v4.warnings.filter { $0.contains("[http]") }.isEmpty, v4.warnings.joined())
        let v6 = try loadConfig("[http]\nlisten = \"[::1]:9464\"\n")
        XCTAssertEqual(v6.http?.listen.host, "::1")
        XCTAssertEqual(v6.http?.listen.port, 9464)
        XCTAssertEqual(v6.http?.listen.family, .ipv6)
        XCTAssertEqual(v6.http?.listen.description, "[::1]:9464")
    }

    func testBadListenValuesAreErrorsAtTheirLine() throws {
        for bad in [
            "localhost:9464", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1", "::1:9464",
            "[::1]9464", "[::1]:", "256.0.0.1:80", "127.0.0.1: 80", "[127.0.0.1]:80", "",
        ] {
            let errors = try configErrors("state_dir = \"/tmp\"\n\n[http]\nlisten = \"\(bad)\"\n")
            XCTAssertEqual(errors.map(\.line), [4], "\(bad): \(errors)")
            XCTAssertTrue(errors[0].description.contains("tidings.toml:4:"), errors[0].description)
        }
        let typed = try configErrors("[http]\nlisten = 9464\n")
        XCTAssertEqual(typed.map(\.line), [2])
        XCTAssertTrue(typed[0].message.contains("'listen' must be a string"), typed[0].message)
    }

    func testUnknownAndMissingKeysInHTTP() throws {
        let errors = try configErrors("[http]\nlisten = \"127.0.0.1:9464\"\nlisen = \"x\"\nport = 1\n")
        XCTAssertEqual(errors.map(\.line), [3, 4])
        XCTAssertTrue(errors[0].message.contains("unknown key 'lisen'"), errors[0].message)
        let missing = try configErrors("a_key_before = 1\n[http]\n")
        XCTAssertTrue(missing.contains { $0.line == 2 && $0.message.contains("missing required key 'listen'") }, "\(missing)")
        let notATable = try configErrors("http = \"127.0.0.1:9464\"\n")
        XCTAssertEqual(notATable.map(\.line), [1])
    }

    func testANonLoopbackAddressNeedsAuthAtItsLine() throws {
        for address in ["0.0.0.0:9464", "[::]:9464", "192.0.2.7:9464"] {
            XCTAssertEqual(ListenAddress(address)?.isLoopback, false, address)
            XCTAssertThrowsError(try loadConfig("# monitoring\n[http]\nlisten = \"\(address)\"\n"), address) { error in
                let text = "\(error)"
                XCTAssertTrue(
                    text.contains("tidings.toml:3:") && text.contains("not a loopback address")
                        && text.contains("needs [http.auth]"), text)
            }
        }
        for loopback in ["127.0.0.1:1", "127.1.2.3:1", "[::1]:1", "[::ffff:127.0.0.1]:1"] {
            XCTAssertEqual(ListenAddress(loopback)?.isLoopback, true, loopback)
        }
    }

    // MARK: routes

    func testRoutes() {
        let readiness = Mutex(Readiness.starting)
        let routes = MonitoringRoutes(readiness: { readiness.withLock { $0 } }, metrics: { Array("tidings_x 1\n".utf8) })
        XCTAssertEqual(routes.respond(method: "GET", path: "/-/healthy", hasBody: false).status, 200)
        for (state, status) in [(Readiness.starting, 503), (.ready, 200), (.reloading, 503), (.stopping, 503)] {
            readiness.withLock { $0 = state }
            XCTAssertEqual(routes.respond(method: "GET", path: "/-/ready", hasBody: false).status, status, "\(state)")
        }
        let metrics = routes.respond(method: "GET", path: "/metrics", hasBody: false)
        XCTAssertEqual(metrics.status, 200)
        XCTAssertEqual(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8")
        XCTAssertEqual(String(decoding: metrics.body, as: UTF8.self), "tidings_x 1\n")
        XCTAssertEqual(routes.respond(method: "GET", path: "/", hasBody: false).status, 404)
        XCTAssertEqual(routes.respond(method: "GET", path: "/metrics/", hasBody: false).status, 404)
        XCTAssertEqual(routes.respond(method: "DELETE", path: "/nope", hasBody: false).status, 404)
        for method in ["POST", "PUT", "HEAD", "DELETE", "OPTIONS"] {
            let r = routes.respond(method: method, path: "/metrics", hasBody: false)
            XCTAssertEqual(r.status, 405, method)
            XCTAssertEqual(r.allow, "GET")
        }
        XCTAssertEqual(routes.respond(method: "GET", path: "/metrics", hasBody: true).status, 413)
        // HEAD on the health checks (issue 30 item 10): their status, no body.
        readiness.withLock { $0 = .starting }
        for (path, status) in [("/-/healthy", 200), ("/-/ready", 503)] {
            let r = routes.respond(method: "HEAD", path: path, hasBody: false)
            XCTAssertEqual(r.status, status, path)
            XCTAssertEqual(r.body, [], path)
            XCTAssertEqual(routes.respond(method: "POST", path: path, hasBody: false).allow, "GET, HEAD", path)
        }
    }

    /// `/-/healthy` is 503 with the reason while the daemon says it is not healthy (its scheduler
    /// loop stalled: issue 30, the daemon's health), 200 again once it is.
    func testHealthyFollowsTheDaemonsVerdict() {
        let verdict = Mutex<String?>("the daemon's scheduler has not run for 45s (stalled; polls are not started)")
        let routes = MonitoringRoutes(readiness: { .ready }, metrics: { [] }, unhealthy: { verdict.withLock { $0 } })
        let stalled = routes.respond(method: "GET", path: "/-/healthy", hasBody: false)
        XCTAssertEqual(stalled.status, 503)
        XCTAssertEqual(String(decoding: stalled.body, as: UTF8.self), "the daemon's scheduler has not run for 45s (stalled; polls are not started)\n")
        verdict.withLock { $0 = nil }
        XCTAssertEqual(routes.respond(method: "GET", path: "/-/healthy", hasBody: false).status, 200)
    }

    // MARK: exported metrics

    func testExpositionHasHelpTypeAndForgetsRemovedSources() throws {
        PrometheusExporter.bootstrap()
        PrometheusExporter.bootstrap()  // once per process: a second call must not trap
        var record = PollRecord()
        record.events = [
            Event(
                id: "01J", source: "unit-a", provider: "exec", kind: "item", event: .new, key: "k", title: "t", body: "",
                url: nil, severity: .info, observedAt: Date(timeIntervalSince1970: 1_700_000_000))
        ]
        record.silenced = ["01J": "abcd123456"]
        record.health = .ok
        TidingsMetrics.polled("unit-a", .succeeded(record, next: Date()), accounting: .counted, seconds: 0.2, now: Date(timeIntervalSince1970: 1_700_000_000))
        TidingsMetrics.delivered(sink: "unit-sink", .retry, count: 3)
        TidingsMetrics.outbox(["unit-sink": OutboxBacklog(pending: 3, dead: 1)])
        var text = String(decoding: PrometheusExporter.exposition(), as: UTF8.self)
        for line in [
            "# TYPE tidings_polls_total counter", "# HELP tidings_polls_total ", "# TYPE tidings_poll_duration_seconds histogram",
            #"tidings_polls_total{source="unit-a",outcome="success"} 1"#, #"tidings_source_up{source="unit-a"} 1.0"#,
            #"tidings_source_last_success_timestamp_seconds{source="unit-a"} 1700000000.0"#,
            #"tidings_events_total{source="unit-a",type="new"} 1"#, #"tidings_events_silenced_total{source="unit-a"} 1"#,
            "# HELP tidings_events_silenced_total Events a silence kept", #"tidings_deliveries_total{sink="unit-sink",outcome="retry"} 3"#,
            #"tidings_outbox_pending{sink="unit-sink"} 3.0"#, #"tidings_outbox_dead{sink="unit-sink"} 1.0"#,
            #"tidings_poll_duration_seconds_bucket{le="0.25"}"#, #"tidings_build_info{version="\#(TidingsVersion.string)"} 1.0"#,
        ] {
            XCTAssertTrue(text.contains(line), "missing \(line) in\n\(text)")
        }
        TidingsMetrics.forget(sources: ["unit-a"])
        TidingsMetrics.forget(sinks: ["unit-sink"])
        TidingsMetrics.outbox([:])
        text = String(decoding: PrometheusExporter.exposition(), as: UTF8.self)
        XCTAssertFalse(text.contains("unit-a"), text)
        XCTAssertFalse(text.contains("unit-sink"), text)
    }
}
