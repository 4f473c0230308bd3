import Glibc
import XCTest

@testable import TidingsApp

/// The CLI's text edits print what Foundation's `padding`, `trimmingCharacters(in:)`,
/// `replacingOccurrences` and `String(format: "%04o")` printed.
final class TextEditsTests: XCTestCase {
    func testPaddedPadsWithSpacesToTheLength() {
        XCTAssertEqual(TextEdits.padded("ok", toUTF16: 6), "ok    ")
        XCTAssertEqual(TextEdits.padded("", toUTF16: 3), "   ")
        XCTAssertEqual(TextEdits.padded("exact", toUTF16: 5), "exact")
    }

    func testPaddedCutsLongerTextToTheLength() {
        XCTAssertEqual(TextEdits.padded("auth-failed-long", toUTF16: 11), "auth-failed")
        XCTAssertEqual(TextEdits.padded("abc"[...], toUTF16: 0), "")
    }

    func testPaddedCountsUTF16UnitsAsNSStringDid() {
        // "é" precomposed is one unit, "😀" two: the pad is what NSString's length left.
        XCTAssertEqual(TextEdits.padded("é", toUTF16: 3), "é  ")
        XCTAssertEqual(TextEdits.padded("😀", toUTF16: 4), "😀  ")
        XCTAssertEqual(TextEdits.padded("a😀b", toUTF16: 3), "a😀")
        // "e" + combining acute: two units, cut between them as NSString cut.
        XCTAssertEqual(TextEdits.padded("e\u{301}x", toUTF16: 1), "e")
        // The String overload (the listings' fast path) pads and cuts as the generic one.
        for (text, length) in [("é", 3), ("😀", 4), ("a😀b", 3), ("e\u{301}x", 1), ("ok", 6), ("auth-failed-long", 11), ("", 0)] {
            XCTAssertEqual(TextEdits.padded(text, toUTF16: length), TextEdits.padded(text[...], toUTF16: length), text)
        }
    }

    func testTrimmingDropsTheSetAtBothEndsOnly() {
        let quotes: Set<Unicode.Scalar> = ["'", "\""]
        XCTAssertEqual(TextEdits.trimming("'/etc/t.toml'", quotes), "/etc/t.toml")
        XCTAssertEqual(TextEdits.trimming("\"'a'b\"'", quotes), "a'b")
        XCTAssertEqual(TextEdits.trimming("plain", quotes), "plain")
        XCTAssertEqual(TextEdits.trimming("'\"'", quotes), "")
        XCTAssertEqual(TextEdits.trimming("", quotes), "")
    }

    func testReplacingMatchesPerScalarLikeNSString() {
        XCTAssertEqual(TextEdits.replacing("\n", with: "\\n", in: "a\nb\n"), "a\\nb\\n")
        // "\r\n" is one Character: a Character match would leave it.
        XCTAssertEqual(TextEdits.replacing("\n", with: "\\n", in: "a\r\nb"), "a\r\\nb")
        XCTAssertEqual(TextEdits.replacing("\n", with: "\\n", in: "none"), "none")
    }

    func testOctalIsZeroPaddedLikePercent04o() {
        XCTAssertEqual(TextEdits.octal(mode_t(0o600), width: 4), "0600")
        XCTAssertEqual(TextEdits.octal(mode_t(0o644), width: 4), "0644")
        XCTAssertEqual(TextEdits.octal(mode_t(0o4755), width: 4), "4755")
        XCTAssertEqual(TextEdits.octal(0, width: 4), "0000")
        XCTAssertEqual(TextEdits.octal(0o12345, width: 4), "12345")
    }
}

final class StandardStreamsTests: XCTestCase {
    func testWritesAllOfALargeText() throws {
        var template = Array("/tmp/tidings-streams-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let path = String(cString: template)
        defer { unlink(path) }
        let text = String(repeating: "line é 😀\n", count: 30_000)
        XCTAssertTrue(StandardStreams.write(text, to: fd))
        XCTAssertTrue(StandardStreams.write("", to: fd))
        close(fd)
        let back = try XCTUnwrap(FileManager.default.contents(atPath: path))
        XCTAssertEqual(String(decoding: back, as: UTF8.self), text)
    }

    func testAClosedReaderIsAFailureNotACrash() {
        signal(SIGPIPE, SIG_IGN)
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        close(fds[0])
        defer { close(fds[1]) }
        XCTAssertFalse(StandardStreams.write("nobody reads this\n", to: fds[1]))
    }
}
