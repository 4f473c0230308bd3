import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class EventFormatterTests: XCTestCase {
    func testPlainLineHasTimeSeveritySourceTitleBodyURL() {
        let e = event("1", source: "helpdesk", severity: .critical, title: "Disk full", body: "/var is\n97% full", url: "https://h/1")
        let line = EventFormatter(color: false).line(e)
        XCTAssertEqual(line, "\(EventFormatter.localTime(e.observedAt))  critical  helpdesk  new  Disk full  — /var is 97% full  <https://h/1>")
        XCTAssertFalse(line.contains("\u{1B}"))
    }

    func testLocalTime() {
        let d = Date(timeIntervalSince1970: 1_700_000_000)  // 2023-11-14T22:13:20Z
        XCTAssertEqual(EventFormatter.localTime(d, timeZone: Zone.named("UTC")!), "2023-11-14 22:13:20")
        XCTAssertEqual(EventFormatter.localTime(d, timeZone: Zone.named("Europe/Stockholm")!), "2023-11-14 23:13:20")
    }

    func testRemoteControlSequencesAreNeutralised() {
        let e = event("1", title: "evil\u{1B}]0;pwned\u{07}\u{1B}[2J", body: "a\r\n\tb\u{9B}c")
        let line = EventFormatter(color: false).line(e)
        XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, line)
        XCTAssertTrue(line.contains(#"evil\u{1B}]0;pwned\u{7}\u{1B}[2J"#), line)
        XCTAssertTrue(line.contains(#"— a b\u{9B}c"#), line)
    }

    /// Bidi overrides and isolates reorder what a reader sees ("txt.exe" shows as "exe.txt");
    /// other invisible format characters hide text. They are shown as escapes, like controls.
    func testBidiAndInvisibleFormatCharactersAreVisible() {
        let e = event(
            "1", title: "invoice \u{202E}exe.txt", body: "\u{2066}a\u{2069} \u{200F}b\u{200E} \u{061C}c\u{200B}d\u{FEFF}", url: "https://h/\u{202A}x\u{202C}")
        let line = EventFormatter(color: false).line(e)
        for s in line.unicodeScalars {
            XCTAssertFalse(s.properties.isBidiControl || s.properties.generalCategory == .format, "U+\(String(s.value, radix: 16)) in \(line)")
        }
        XCTAssertTrue(line.contains(#"invoice \u{202E}exe.txt"#), line)
        XCTAssertTrue(line.contains(#"— \u{2066}a\u{2069} \u{200F}b\u{200E} \u{61C}c\u{200B}d\u{FEFF}"#), line)
        XCTAssertTrue(line.contains(#"<https://h/\u{202A}x\u{202C}>"#), line)
    }

    /// Text that shapes ordinary words and emoji stays as it is.
    func testJoinersEmojiAndAccentsAreKept() {
        let text = "👩\u{200D}💻 caf\u{00E9} e\u{0301} \u{0645}\u{200C}\u{0645} so\u{00AD}ft 🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}"
        XCTAssertEqual(TerminalText.line(text), text)
    }

    func testLineAndParagraphSeparatorsAreLineBreaks() {
        XCTAssertEqual(TerminalText.line("a\u{2028}b\u{2029}\r\nc\t d\n"), "a b c d")
    }

    /// A log message quoting a remote body: one line, no control or bidi character, secrets scrubbed.
    func testLogLinesAreEscapedAndStayOneLine() {
        Redactor.shared.register("log-secret-123")
        let line = StderrLogHandler.line(
            at: Date(timeIntervalSince1970: 0), level: .warning, metadata: ["source": "api\u{1B}[2J"],
            message: "HTTP 500: line1\r\u{1B}[1A\u{1B}[Kforged\n2026-01-01T00:00:00Z error fake \u{202E}txt log-secret-123")
        XCTAssertEqual(
            line,
            #"1970-01-01T00:00:00Z warning source=api\u{1B}[2J HTTP 500: line1 \u{1B}[1A\u{1B}[Kforged 2026-01-01T00:00:00Z error fake \u{202E}txt ‹redacted›"#
                + "\n")
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
