import FoundationEssentials
import Glibc
import TidingsPluginAPI
import XCTest

@testable import TidingsSinks

/// The stand-ins for corelibs Foundation's string methods (Support/ScalarText.swift) and for
/// FileHandle's write. The expected values are what Foundation's `removingPercentEncoding`,
/// `addingPercentEncoding` and `String(format:)` gave for the same input.
final class SinkScalarTextTests: XCTestCase {
    func testPercentDecodingIsNilForABrokenEscapeOrBytesThatAreNotUTF8() {
        XCTAssertEqual("a%20b".percentDecoded, "a b")
        XCTAssertEqual("%C3%A9".percentDecoded, "é")
        XCTAssertEqual("%2b".percentDecoded, "+")
        XCTAssertEqual("abc".percentDecoded, "abc")
        XCTAssertEqual("".percentDecoded, "")
        for broken in ["%zz", "%2", "100%", "%FF", "%%41", "%41%"] {
            XCTAssertNil(broken.percentDecoded, broken)
        }
    }

    func testMatrixPathSegmentsKeepOnlyUnreservedCharacters() {
        XCTAssertEqual(MatrixSink.pathSegment("!room:example.org/#a é~"), "%21room%3Aexample.org%2F%23a%20%C3%A9~")
    }

    func testLinkTargetsEncodeWithTwoHexDigitsOrMore() throws {
        XCTAssertEqual(DiscordSink.linkTarget("http://h/a b(c)\u{2028}"), "http://h/a%20b%28c%29%2028")
        XCTAssertEqual(SlackSink.linkTarget(try XCTUnwrap(URL(string: "http://h/a|b?x=1&y=2"))), "http://h/a%7Cb?x=1&amp;y=2")
    }

    func testReplacingAndTrimmingScalars() {
        XCTAssertEqual("a\r\nb".replacingScalars("\n", with: "<br>\n"), "a\r<br>\nb")
        XCTAssertEqual("[::1]".trimming(scalarsIn: "[]"), "::1")
    }

    func testWriteAllWritesEveryByteOrNamesTheErrno() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]) }
        let bytes = Array("one line\n".utf8)
        XCTAssertNil(StdoutSink.writeAll(bytes, to: fds[1]))
        close(fds[1])
        var got = [UInt8](repeating: 0, count: 64)
        let n = read(fds[0], &got, got.count)
        XCTAssertEqual(Array(got.prefix(max(n, 0))), bytes)
        XCTAssertEqual(StdoutSink.writeAll(bytes, to: fds[1]), EBADF)
    }
}
