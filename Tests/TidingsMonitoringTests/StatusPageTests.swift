import Foundation
import TidingsMonitoring
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The status page (DESIGN §13): `[http] status_page` and `[http.auth]`, its guards (CSRF token,
/// same origin, authentication) and its rendering of hostile text, without a socket.
final class StatusPageTests: XCTestCase {
    // MARK: configuration

    func testStatusPageIsOnWithHTTPAndAuthIsOptionalOnLoopback() throws {
        let plain = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\n")
        XCTAssertEqual(plain.http?.statusPage, true, "DESIGN §13: with [http], GET / serves the page")
        XCTAssertNil(plain.http?.auth)
        let off = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nstatus_page = false\n")
        XCTAssertEqual(off.http?.statusPage, false)
    }

    func testANonLoopbackListenNeedsAuthEvenWithoutThePage() throws {
        for extra in ["", "status_page = false\n"] {
            let errors = try configErrors("[http]\nlisten = \"0.0.0.0:9464\"\n\(extra)")
            XCTAssertEqual(errors.map(\.line), [2], "\(errors)")
            XCTAssertTrue(errors[0].message.contains("needs [http.auth]"), errors[0].message)
        }
    }

    func testANonLoopbackStatusPageNeedsAuthAndTheErrorNamesTheLine() throws {
        let errors = try configErrors("# x\n[http]\nlisten = \"0.0.0.0:9464\"\nstatus_page = true\nbogus = 1\n")
        let bad = try configErrors("[http]\nlisten = \"localhost:1\"\nstatus_page = true\n[http.auth]\ntoken = 1\n")
        XCTAssertEqual(bad.map(\.line), [2], "a bad listen, and no unknown key after it: \(bad)")
        XCTAssertEqual(errors.map(\.line), [3, 5], "\(errors)")
        XCTAssertTrue(errors[0].description.contains("tidings.toml:3:"), errors[0].description)
        XCTAssertTrue(errors[0].message.contains("needs [http.auth]"), errors[0].message)
        let dir = try scratchDirectory()
        try write("pw-0123456\n", to: "\(dir)/pw", mode: 0o600)
        let ok = try loadConfig("[http]\nlisten = \"0.0.0.0:9464\"\nstatus_page = true\n[http.auth]\nuser = \"ops\"\npassword_file = \"\(dir)/pw\"\n")
        guard case .basic(let user, let password)? = ok.http?.auth else { return XCTFail("\(String(describing: ok.http))") }
        XCTAssertEqual(user, "ops")
        XCTAssertEqual(password.value, "pw-0123456")
        XCTAssertFalse(ok.warnings.contains { $0.contains("not a loopback") }, "\(ok.warnings)")
    }

    func testAuthTakesUserAndPasswordOrATokenNotBoth() throws {
        let dir = try scratchDirectory()
        try write("tok-abcdef\n", to: "\(dir)/tok", mode: 0o600)
        let bearer = try loadConfig("[http]\nlisten = \"127.0.0.1:1\"\n[http.auth]\ntoken_file = \"\(dir)/tok\"\n")
        guard case .bearer(let token)? = bearer.http?.auth else { return XCTFail() }
        XCTAssertEqual(token.value, "tok-abcdef")
        for (body, line) in [
            ("user = \"ops\"", 3), ("user = \"ops\"\ntoken_file = \"\(dir)/tok\"", 3), ("", 3),
            ("user = \"a:b\"\npassword_file = \"\(dir)/tok\"", 4), ("pasword = 1", 4), ("pasword = 1", 3),
        ] {
            let errors = try configErrors("[http]\nlisten = \"127.0.0.1:1\"\n[http.auth]\n\(body)\n")
            XCTAssertTrue(errors.contains { $0.line == line }, "\(body): \(errors)")
        }
    }

    // MARK: guards

    func testCSRFTokensAreThisProcesssAndExpire() {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let a = WebSecurity()
        let b = WebSecurity()
        let token = a.csrfToken(now: now)
        XCTAssertTrue(a.validCSRF(token, now: now))
        XCTAssertTrue(a.validCSRF(token, now: now.addingTimeInterval(WebSecurity.tokenLifetime - 1)))
        XCTAssertFalse(a.validCSRF(token, now: now.addingTimeInterval(WebSecurity.tokenLifetime + 1)))
        XCTAssertFalse(b.validCSRF(token, now: now), "another daemon's key")
        // With a known key: ISSUED.hex(HMAC-SHA256(key, "tidings-csrf:ISSUED")) (Python's hmac).
        let known = WebSecurity(key: [UInt8](repeating: 7, count: 32))
        XCTAssertEqual(known.csrfToken(now: now), "2000000000.63262d6b89c7d800e7469b012f8d6051883938c05ab9d38f74df3e1cfded2d0e")
        XCTAssertTrue(known.validCSRF("2000000000.63262d6b89c7d800e7469b012f8d6051883938c05ab9d38f74df3e1cfded2d0e", now: now))
        let (issued, mac) = (token.split(separator: ".")[0], token.split(separator: ".")[1])
        XCTAssertFalse(a.validCSRF("\(Int(issued)! + 1).\(mac)", now: now), "the time is part of the MAC")
        for bad in [nil, "", ".", "x.y", "\(issued).", "\(issued).\(mac)00", String(repeating: "1", count: 200)] {
            XCTAssertFalse(a.validCSRF(bad, now: now), bad ?? "nil")
        }
    }

    func testSameOriginComparesOriginOrRefererWithTheHostsOfTheListener() {
        let hosts = HostPolicy(listen: ListenAddress("127.0.0.1:9464")!, allowed: [HostName("status.example")!])
        func same(_ origin: String?, _ referer: String?, _ h: HostPolicy = hosts) -> Bool { WebSecurity.sameOrigin(origin: origin, referer: referer, hosts: h) }
        XCTAssertTrue(same("http://127.0.0.1:9464", nil))
        XCTAssertTrue(same("http://localhost:9464", nil))
        XCTAssertTrue(same(nil, "http://127.0.0.1:9464/silences?x=1"))
        XCTAssertTrue(same("https://Status.Example", nil), "an allowed name, any port (a proxy in front)")
        XCTAssertTrue(same("http://[::1]:9464", nil, HostPolicy(listen: ListenAddress("[::1]:9464")!, allowed: [])))
        XCTAssertFalse(same("http://127.0.0.1:9465", nil))
        XCTAssertFalse(same("http://127.0.0.1", nil), "port 80 is another origin")
        XCTAssertFalse(same("http://evil.example", "http://127.0.0.1:9464/"), "Origin wins")
        XCTAssertFalse(same("null", nil))
        XCTAssertFalse(same("null", "http://127.0.0.1:9464/silences"), "an opaque origin, whatever the Referer says")
        XCTAssertFalse(same(nil, nil))
        XCTAssertFalse(same("file:///x", nil))
        XCTAssertFalse(same("http://127.0.0.1:9464.evil.example", nil))
        XCTAssertFalse(same("http://evil.test:9464", nil), "a re-bound name is not the listener, whatever Host says")
    }

    func testHostMustNameTheListener() {
        let hosts = HostPolicy(listen: ListenAddress("127.0.0.1:9464")!, allowed: [HostName("Proxy.Example")!, HostName("192.0.2.7:8443")!])
        for ok in ["127.0.0.1:9464", "127.0.0.1", "localhost", "LOCALHOST:9464", "proxy.example", "proxy.example:443", "192.0.2.7:8443"] {
            XCTAssertTrue(hosts.allowsHost(ok), ok)
        }
        for bad in [nil, "", "evil.test", "evil.test:9464", "127.0.0.1:9465", "localhost:1", "192.0.2.7", "192.0.2.7:9464", "[::1]:9464",
            "127.0.0.1.evil.test", "proxy.example.evil.test", "proxy.example:x", "user@127.0.0.1:9464", "127.0.0.1:9464/x"] {
            XCTAssertFalse(hosts.allowsHost(bad), bad ?? "nil")
        }
        let wildcard = HostPolicy(listen: ListenAddress("[::]:9464")!, allowed: [])
        for ok in ["[::]:9464", "127.0.0.1:9464", "[::1]:9464", "localhost"] { XCTAssertTrue(wildcard.allowsHost(ok), ok) }
        XCTAssertFalse(wildcard.allowsHost("192.0.2.7:9464"), "the machine's other addresses only through allowed_hosts")
        XCTAssertEqual(hosts.misdirected.status, 421)
    }

    func testAllowedHostsAreReadAndCheckedAtTheirLine() throws {
        let ok = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nallowed_hosts = [\"Status.Example.org\", \"[2001:DB8::7]:443\"]\n")
        XCTAssertEqual(ok.http?.allowedHosts, [HostName(name: "status.example.org", port: nil), HostName(name: "[2001:db8::7]", port: 443)])
        for bad in ["\"https://x/\"", "\"x/y\"", "\"\"", "\"a b\"", "\"x:0\"", "\"x:99999\"", "\"[::1\"", "\"a..b\""] {
            let errors = try configErrors("[http]\nlisten = \"127.0.0.1:9464\"\nallowed_hosts = [\(bad)]\n")
            XCTAssertEqual(errors.map(\.line), [3], "\(bad): \(errors)")
        }
    }

    func testAuthorizationIsCheckedExactly() {
        let basic = HTTPAuth.basic(user: "ops", password: Secret("pw-secret-1"))
        let good = "Basic " + Data("ops:pw-secret-1".utf8).base64EncodedString()
        XCTAssertTrue(WebSecurity.authorized(good, basic))
        XCTAssertTrue(WebSecurity.authorized("basic " + good.dropFirst(6), basic), "the scheme is case-insensitive")
        XCTAssertFalse(WebSecurity.authorized(nil, basic))
        XCTAssertFalse(WebSecurity.authorized("Basic " + Data("ops:pw-secret-2".utf8).base64EncodedString(), basic))
        XCTAssertFalse(WebSecurity.authorized("Bearer pw-secret-1", basic))
        XCTAssertFalse(WebSecurity.authorized(good + String(repeating: "A", count: 5000), basic))
        let bearer = HTTPAuth.bearer(token: Secret("tok-secret-1"))
        XCTAssertTrue(WebSecurity.authorized("Bearer tok-secret-1", bearer))
        XCTAssertFalse(WebSecurity.authorized("Bearer tok-secret-", bearer))
        XCTAssertFalse(WebSecurity.authorized("Bearertok-secret-1", bearer))
        XCTAssertTrue(WebSecurity.authorized(nil, nil), "no auth configured")
        XCTAssertFalse(WebSecurity.authorized("Basic " + Data("ops:".utf8).base64EncodedString(), .basic(user: "ops", password: Secret(""))))
        XCTAssertFalse(WebSecurity.authorized("Bearer ", .bearer(token: Secret(""))))
    }

    // MARK: pages

    private func makePages(_ config: TidingsConfig, now: Date, pulse: DaemonPulse? = nil) throws -> (StatusPages, StateStore) {
        let store = try TestState.make(directory: try scratchDirectory())
        let pages = StatusPages(clock: { now })
        pages.configure(config.http)
        pages.attach(
            .init(
                config: { config }, store: store, pid: 4242, startedAt: now.addingTimeInterval(-60),
                pollNow: { _ in [] }, outboxChanged: {}, pulse: { pulse }))
        return (pages, store)
    }

    func testPagesEscapeHostileTextAndChangesNeedTokenAndOrigin() async throws {
        let now = Date()
        let config = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nstatus_page = true\n[sinks.out]\ntype = \"stdout\"\n")
        let (pages, store) = try makePages(config, now: now)
        let hostile = "<script>alert(1)</script>\"'&"
        try SilenceStore.add(
            store, matchers: [try SilenceMatcher(parsing: "source=x")], comment: hostile, createdBy: "t",
            now: now, until: now.addingTimeInterval(3600))
        let answer = await pages.respond(WebRequest(method: "GET", path: "/silences"))
        let html = try XCTUnwrap(answer)
        XCTAssertEqual(html.status, 200)
        let text = String(decoding: html.body, as: UTF8.self)
        XCTAssertFalse(text.contains("<script>alert"), text)
        XCTAssertTrue(text.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"), text)
        XCTAssertEqual(html.headers["X-Content-Type-Options"], "nosniff")
        XCTAssertTrue(html.headers["Content-Security-Policy"]?.contains("frame-ancestors 'none'") ?? false)

        let token = pages.security.csrfToken(now: now)
        let host = ["host": "127.0.0.1:9464", "content-type": "application/x-www-form-urlencoded"]
        let form = Array("matchers=source%3Dy&duration=1h&comment=ok&csrf=\(token)".utf8)
        let noToken = Array("matchers=source%3Dy&duration=1h".utf8)
        let refused = [
            WebRequest(method: "POST", path: "/silences", headers: host.merging(["origin": "http://127.0.0.1:9464"]) { $1 }, body: noToken),
            WebRequest(method: "POST", path: "/silences", headers: host.merging(["origin": "http://127.0.0.2:9464"]) { $1 }, body: form),
            WebRequest(method: "POST", path: "/silences", headers: host, body: form),
        ]
        for r in refused {
            let answer = await pages.respond(r)
            XCTAssertEqual(answer?.status, 403, "\(r.headers)")
        }
        XCTAssertEqual(try SilenceStore.all(store).count, 1)
        let ok = await pages.respond(
            WebRequest(method: "POST", path: "/silences", headers: host.merging(["origin": "http://127.0.0.1:9464"]) { $1 }, body: form))
        XCTAssertEqual(ok?.status, 303)
        XCTAssertEqual(ok?.headers["Location"], "/silences?done=added")
        XCTAssertEqual(try SilenceStore.all(store).count, 2)
    }

    func testRecentPollsAreBoundedAndForgotten() {
        let log = RecentPolls()
        for i in 0..<(RecentPolls.perSource + 5) {
            log.record("a", .init(at: Date(timeIntervalSince1970: Double(i)), seconds: 0, error: nil, events: 0))
        }
        log.record("b", .init(at: Date(), seconds: 1, error: "x", events: 0))
        XCTAssertEqual(log.of("a").count, RecentPolls.perSource)
        XCTAssertEqual(log.of("a").first?.at, Date(timeIntervalSince1970: 5), "the oldest go first")
        log.forget(["a"])
        XCTAssertEqual(log.of("a"), [])
        XCTAssertEqual(log.hours("a"), RecentPolls.Hours())
        XCTAssertEqual(log.of("b").count, 1)
    }

    /// A source polled every minute for two days keeps 20 polls and 24 hour counts, not every poll
    /// (issue 33: a day of polls in full was 80 KiB per source), and the chart still counts the
    /// last day's polls and failures.
    func testRecentPollsKeepADayOfCountsInConstantSpace() {
        let log = RecentPolls()
        let start = 1_000 * 3600.0  // an hour's start
        for i in 0..<2880 {
            log.record("a", .init(at: Date(timeIntervalSince1970: start + Double(i) * 60), seconds: 0, error: i % 10 == 0 ? "x" : nil, events: 0))
        }
        XCTAssertEqual(log.of("a").count, RecentPolls.perSource)
        XCTAssertEqual(log.of("a").last?.at, Date(timeIntervalSince1970: start + 2879 * 60))
        let hours = log.hours("a")
        XCTAssertEqual(hours.last, 1_047)
        XCTAssertEqual(hours.polls, [UInt16](repeating: 60, count: 24))
        XCTAssertEqual(hours.failed, [UInt16](repeating: 6, count: 24))
        let svg = StatusChart.hours(events: [], polls: hours, now: Date(timeIntervalSince1970: start + 2880 * 60))
        XCTAssertTrue(svg.contains("<title>last 24 h: 1440 polls (144 failed), 0 events</title>"), svg)
        // A poll older than the hours kept is not counted; a gap of more than a day clears them.
        log.record("a", .init(at: Date(timeIntervalSince1970: start), seconds: 0, error: nil, events: 0))
        XCTAssertEqual(log.hours("a").polls.reduce(0, +), 1440)
        log.record("a", .init(at: Date(timeIntervalSince1970: start + 5 * 86_400), seconds: 0, error: nil, events: 0))
        XCTAssertEqual(log.hours("a").polls.reduce(0, +), 1)
    }

    func testOffWithStatusPageFalseAndTheOverviewRenders() async throws {
        let now = Date()
        let off = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nstatus_page = false\n")
        let (offPages, _) = try makePages(off, now: now)
        let none = await offPages.respond(WebRequest(method: "GET", path: "/"))
        XCTAssertNil(none, "with status_page = false the monitoring routes answer (404)")
        let on = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nstatus_page = true\n[sinks.out]\ntype = \"stdout\"\n")
        let (onPages, _) = try makePages(on, now: now)
        let answer = await onPages.respond(WebRequest(method: "GET", path: "/"))
        let overview = try XCTUnwrap(answer)
        let text = String(decoding: overview.body, as: UTF8.self)
        XCTAssertEqual(overview.status, 200, text)
        XCTAssertTrue(text.contains("Daemon PID 4242"), text)
        XCTAssertTrue(text.contains("<meta name=\"viewport\""), text)
        let missing = await onPages.respond(WebRequest(method: "GET", path: "/sources/nope"))
        XCTAssertEqual(missing?.status, 404)
        let put = await onPages.respond(WebRequest(method: "PUT", path: "/silences"))
        XCTAssertEqual(put?.status, 405)
    }

    /// Issue 30: the overview's summary says when polls overrun their timeout (the daemon's pulse).
    func testTheOverviewNeedsAttentionWhilePollsOverrun() async throws {
        let now = Date()
        let config = try loadConfig("[http]\nlisten = \"127.0.0.1:9464\"\nstatus_page = true\n[sinks.out]\ntype = \"stdout\"\n")
        let (pages, _) = try makePages(config, now: now, pulse: DaemonPulse(tickAt: now, overrunning: ["feed"], at: now))
        let answer = await pages.respond(WebRequest(method: "GET", path: "/"))
        let text = String(decoding: try XCTUnwrap(answer).body, as: UTF8.self)
        XCTAssertTrue(text.contains("<strong>Needs attention:</strong></p><ul><li>1 poll running past its timeout (feed)</li>"), text)
        let (calm, _) = try makePages(config, now: now, pulse: DaemonPulse(tickAt: now, overrunning: [], at: now))
        let calmAnswer = await calm.respond(WebRequest(method: "GET", path: "/"))
        let calmText = String(decoding: try XCTUnwrap(calmAnswer).body, as: UTF8.self)
        XCTAssertFalse(calmText.contains("Needs attention"), calmText)
    }

    func testTheChartCountsPollsAndEventsPerHourOfTheLastDay() {
        let now = Date()
        func event(_ ago: TimeInterval) -> Event {
            Event(
                id: UUID().uuidString, source: "s", provider: "p", kind: "item", event: .new, key: "k", title: "t", body: "",
                url: nil, severity: .info, observedAt: now.addingTimeInterval(-ago), data: .null)
        }
        let log = RecentPolls()
        for poll in [
            RecentPolls.Poll(at: now.addingTimeInterval(-90_000), seconds: 0.1, error: nil, events: 0),
            RecentPolls.Poll(at: now.addingTimeInterval(-7200), seconds: 0.3, error: "HTTP 500", events: 0),
            RecentPolls.Poll(at: now.addingTimeInterval(-5), seconds: 0.2, error: nil, events: 2),
        ] { log.record("s", poll) }
        let svg = StatusChart.hours(events: [event(10), event(20), event(3 * 3600 + 5), event(2 * 86_400)], polls: log.hours("s"), now: now)
        XCTAssertTrue(svg.contains("<title>last 24 h: 2 polls (1 failed), 3 events</title>"), svg)
        // The axis; polls in two hours, one of them failed; events in two hours.
        XCTAssertEqual(svg.components(separatedBy: "<rect").count - 1, 1 + 2 + 1 + 2, svg)
        XCTAssertEqual(svg.components(separatedBy: "fill=\"#c0392b\"").count - 1, 1, svg)
        XCTAssertTrue(StatusPages.safeURL("javascript:alert(1)") == nil && StatusPages.safeURL("https://x.example/a") != nil)
    }
}
