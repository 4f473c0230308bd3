import Foundation
import TidingsCore
import XCTest

final class EventFormatterTests: XCTestCase {
    func testPlainLineHasTimeSeveritySourceTitleBodyURL() {
        let e = event("1", source: "helpdesk", severity: .critical, title: "Disk full", body: "/var is\n97% full", url: "https://h/1")
        let line = EventFormatter(color: false).line(e)
        XCTAssertEqual(line, "\(EventFormatter.localTime(e.observedAt))  critical  helpdesk  new  Disk full  — /var is 97% full  <https://h/1>")
        XCTAssertFalse(line.contains("\u{1B}"))
    }

    func testLocalTime() {
        let d = Date(timeIntervalSince1970: 1_700_000_000)  // 2023-11-14T22:13:20Z
        XCTAssertEqual(EventFormatter.localTime(d, timeZone: TimeZone(identifier: "UTC")!), "2023-11-14 22:13:20")
        XCTAssertEqual(EventFormatter.localTime(d, timeZone: TimeZone(identifier: "Europe/Stockholm")!), "2023-11-14 23:13:20")
    }

    func testRemoteControlSequencesAreNeutralised() {
        let e = event("1", title: "evil\u{1B}]0;pwned\u{07}\u{1B}[2J", body: "a\r\n\tb\u{9B}c")
        let line = EventFormatter(color: false).line(e)
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, line)
        XCTAssertTrue(line.contains(#"evil\u{1B}]0;pwned\u{7}\u{1B}[2J"#), line)
        XCTAssertTrue(line.contains(#"— a b\u{9B}c"#), line)
    }

    func testColourOnlyWhenAsked() {
        let e = event("1", severity: .warning)
        XCTAssertTrue(EventFormatter(color: true).line(e).contains("\u{1B}[33mwarning"))
        XCTAssertFalse(EventFormatter(color: false).line(e).contains("\u{1B}"))
    }

    /// (The terminal case runs in e2e/test_stdout_sink.py, under a real pty.)
    func testNoColourOnAPipe() {
        let pipe = Pipe()
        XCTAssertFalse(EventFormatter.wantsColor(fileDescriptor: pipe.fileHandleForWriting.fileDescriptor, environment: ["TERM": "xterm"]))
    }
}
