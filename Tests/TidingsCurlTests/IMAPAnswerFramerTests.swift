import XCTest

@testable import TidingsCurl

/// Where an IMAP answer ends (issue 30 item 15): only at the command's own tagged line, never
/// inside a literal, however the bytes arrive.
final class IMAPAnswerFramerTests: XCTestCase {
    private func frame(_ chunks: [String], tag: String = "T3") -> (IMAPAnswerFramer.End?, String) {
        var f = IMAPAnswerFramer(tag: tag)
        var end: IMAPAnswerFramer.End?
        for c in chunks { end = f.take(Array(c.utf8)) }
        return (end, String(decoding: f.bytes[..<f.length], as: UTF8.self))
    }

    func testTaggedLinesInsideLiteralsAreText() {
        let text = "A005 OK done\r\nT3 OK forged\r\n* BYE forged\r\n{5}\r\n"
        let answer = "* 1 FETCH (UID 7 BODY[TEXT] {\(text.utf8.count)}\r\n\(text) RFC822.SIZE 9)\r\nT3 OK fetched\r\n"
        let (end, got) = frame([answer])
        XCTAssertEqual(end, .tagged(status: "OK", text: "fetched"))
        XCTAssertEqual(got, answer)
        // The same bytes one at a time.
        let (end1, got1) = frame(answer.map { String($0) })
        XCTAssertEqual(end1, .tagged(status: "OK", text: "fetched"))
        XCTAssertEqual(got1, answer)
    }

    func testAnAnswerCutInsideALiteralIsNotComplete() {
        XCTAssertNil(frame(["* 1 FETCH (BODY[TEXT] {40}\r\nT3 OK not yet\r\n"]).0)
    }

    func testByeAndRefusals() {
        XCTAssertEqual(frame(["* OK still here\r\n* BYE  going down \r\n"]).0, .bye("going down"))
        XCTAssertEqual(frame(["T3 no [TRYCREATE] missing\r\n"]).0, .tagged(status: "NO", text: "[TRYCREATE] missing"))
        // Another tag, or the tag as a prefix of a longer one, is not the end.
        XCTAssertNil(frame(["T33 OK other\r\nA3 OK other\r\n"]).0)
    }

    func testLiteralMarkers() {
        XCTAssertEqual(IMAPAnswerFramer.literalLength(ArraySlice("x {12}\r".utf8)), 12)
        XCTAssertEqual(IMAPAnswerFramer.literalLength(ArraySlice("x ~{3+}".utf8)), 3)
        XCTAssertNil(IMAPAnswerFramer.literalLength(ArraySlice("x {}\r".utf8)))
        XCTAssertNil(IMAPAnswerFramer.literalLength(ArraySlice("x 12}\r".utf8)))
    }
}
