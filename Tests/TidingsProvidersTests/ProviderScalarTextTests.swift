import FoundationEssentials
import TidingsPluginAPI
import XCTest

@testable import TidingsProviders

/// The stand-ins for corelibs Foundation's string methods (Support/ScalarText.swift). The
/// expected values are what Foundation's `trimmingCharacters`, `replacingOccurrences`,
/// `addingPercentEncoding` and `String(format:)` gave for the same input.
final class ProviderScalarTextTests: XCTestCase {
    func testTrimmingScalarsRemovesOnlyTheGivenOnesAtEitherEnd() {
        XCTAssertEqual("  'utf-8\" ".trimming(scalarsIn: "\"' "), "utf-8")
        XCTAssertEqual("\"\"".trimming(scalarsIn: "\""), "")
        XCTAssertEqual("a\"b".trimming(scalarsIn: "\""), "a\"b")
        XCTAssertEqual("[::1]".trimming(scalarsIn: "[]"), "::1")
        // Per scalar, not per character: a combining mark goes alone.
        XCTAssertEqual("e\u{301}\u{301}".trimming(scalarsIn: "\u{301}"), "e")
        XCTAssertEqual("<id@host> "[...].trimming(scalarsIn: "<> "), "id@host")
    }

    func testReplacingScalarsReplacesEveryOccurrenceLeftToRight() {
        XCTAssertEqual("~01".replacingScalars("~1", with: "/").replacingScalars("~0", with: "~"), "~1")
        XCTAssertEqual("aaa".replacingScalars("aa", with: "b"), "ba")
        XCTAssertEqual("a\0b\0".replacingScalars("\0", with: ""), "ab")
        XCTAssertEqual("major_outage".replacingScalars("_", with: " "), "major outage")
        // "\n" is found inside "\r\n", as Foundation found it.
        XCTAssertEqual("a\r\nb".replacingScalars("\n", with: "<br>\n"), "a\r<br>\nb")
        XCTAssertEqual("x".replacingScalars("", with: "y"), "x")
    }

    func testQueryValuesAreEncodedAsFoundationsQueryAllowedLessPlusAmpEqualsHashSemicolon() {
        XCTAssertEqual(
            ProviderSupport.encodeQueryValue("a b+c&d=e#f;g/h?i:j@k~é!$'()*,[]|\"%\u{1F600}"),
            "a%20b%2Bc%26d%3De%23f%3Bg/h?i:j@k~%C3%A9!$'()*,%5B%5D%7C%22%25%F0%9F%98%80")
        XCTAssertEqual(ProviderSupport.encodeQueryValue(""), "")
    }

    func testHexAndZeroPadding() {
        XCTAssertEqual(hexCode(0x20), "20")
        XCTAssertEqual(hexCode(0xA), "0A")
        XCTAssertEqual(hexCode(0x2028), "2028")
        XCTAssertEqual(zeroPadded(5, width: 2), "05")
        XCTAssertEqual(zeroPadded(42, width: 2), "42")
        XCTAssertEqual(zeroPadded(123, width: 2), "123")
    }

    func testCertificateHostsAreASCIILettersDigitsAndDotDashUnderscoreColon() throws {
        XCTAssertEqual(try CertificateTarget(parsing: "Mail-1.example_x.org:993").host, "mail-1.example_x.org")
        XCTAssertEqual(try CertificateTarget(parsing: "[::1]:8443").host, "::1")
        XCTAssertThrowsError(try CertificateTarget(parsing: "a~b.org"))
        XCTAssertThrowsError(try CertificateTarget(parsing: "bücher.example"))
    }
}
