import Foundation
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class DesktopStyleTests: XCTestCase {
    func testEscapesMarkup() {
        XCTAssertEqual(DesktopStyle.escape(#"<b>x</b> & <a href="evil">y</a>"#), #"&lt;b&gt;x&lt;/b&gt; &amp; &lt;a href="evil"&gt;y&lt;/a&gt;"#)
        XCTAssertEqual(DesktopStyle.escape("&amp;"), "&amp;amp;")
        let n = DesktopStyle().single(event("1", title: "<i>T</i>", body: "a<b>c"))
        XCTAssertEqual(n.body, "a&lt;b&gt;c")
        XCTAssertEqual(n.summary, "<i>T</i>")
        var plain = DesktopStyle()
        plain.bodyMarkup = false
        XCTAssertEqual(plain.single(event("1", body: "a<b>c")).body, "a<b>c")
    }

    func testUrgencyFromSeverity() {
        var s = DesktopStyle()
        XCTAssertEqual(s.urgency(.info), .normal)
        XCTAssertEqual(s.urgency(.warning), .normal)
        XCTAssertEqual(s.urgency(.critical), .critical)
        s.infoUrgency = .low
        XCTAssertEqual(s.urgency(.info), .low)
    }

    func testExpiry() throws {
        var s = DesktopStyle()
        XCTAssertEqual(s.expiry(kind: "message", severity: .info).milliseconds, -1)
        XCTAssertEqual(s.expiry(kind: "notice", severity: .info).milliseconds, 0)
        s.expiry = try DesktopExpiry(parsing: "10s")
        s.expiryByKind["alert"] = try DesktopExpiry(parsing: "1m")
        XCTAssertEqual(s.expiry(kind: "message", severity: .warning).milliseconds, 10_000)
        XCTAssertEqual(s.expiry(kind: "alert", severity: .warning).milliseconds, 60_000)
        XCTAssertEqual(s.expiry(kind: "alert", severity: .critical).milliseconds, 0, "critical never expires")
        XCTAssertEqual(try DesktopExpiry(parsing: "never"), .never)
        XCTAssertEqual(try DesktopExpiry(parsing: "default"), .serverDefault)
        XCTAssertThrowsError(try DesktopExpiry(parsing: "soon"))
    }

    func testOpenActionOnlyForWebURLs() {
        let s = DesktopStyle()
        XCTAssertEqual(s.single(event("1", url: "https://x.example/a")).openURL, "https://x.example/a")
        XCTAssertNil(s.single(event("1", url: "file:///etc/passwd")).openURL)
        XCTAssertNil(s.single(event("1")).openURL)
    }

    func testBurstBecomesOneSummaryPerSource() {
        let s = DesktopStyle()
        let burst = (1...12).map { event("m\($0)", source: "sportdate", title: "msg \($0)", url: "https://s/inbox") }
        let few = (1...2).map { event("a\($0)", source: "alerts", kind: "alert", severity: .warning) }
        let out = s.notifications(for: burst + few)
        XCTAssertEqual(out.count, 3)
        XCTAssertEqual(out[0].summary, "12 new messages from sportdate")
        XCTAssertTrue(out[0].body.hasPrefix("• msg 1\n"), out[0].body)
        XCTAssertTrue(out[0].body.hasSuffix("…and 7 more"), out[0].body)
        XCTAssertEqual(out[0].openURL, "https://s/inbox")
        XCTAssertEqual(out[1].urgency, .normal)
    }

    func testExactlyMaxPerPollIsNotSummarised() {
        var s = DesktopStyle()
        XCTAssertEqual(s.notifications(for: (1...5).map { event("\($0)") }).count, 5)
        s.maxPerPoll = 2
        let mixed = [event("1", severity: .critical), event("2", kind: "notice", type: .changed), event("3")]
        let out = s.notifications(for: mixed)
        XCTAssertEqual(out.map(\.summary), ["3 events from src"])
        XCTAssertEqual(out[0].urgency, .critical)
        XCTAssertEqual(out[0].expiry, .never)
    }
}
