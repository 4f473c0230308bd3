import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// What the ``Redactor`` recognises of a secret: its token parts and its encoded forms.
final class RedactorTests: XCTestCase {
    private func redactor(_ secrets: [(String, SecretShape)]) -> Redactor {
        let r = Redactor()
        for (value, shape) in secrets { r.register(value, shape: shape) }
        return r
    }

    private func assertScrubbed(_ r: Redactor, _ forms: [String], file: StaticString = #filePath, line: UInt = #line) {
        for form in forms {
            XCTAssertEqual(r.scrub("<\(form)>"), "<‹redacted›>", "form \(form)", file: file, line: line)
        }
    }

    func testBearerHeaderValueAndItsTokenInEveryEncoding() {
        let token = #"Tok"en\Sec/ret+pl&us! é"#
        let r = redactor([("Bearer " + token, .headerValue)])
        assertScrubbed(
            r,
            [
                "Bearer " + token, token,
                #"Tok\"en\\Sec/ret+pl&us! é"#,  // JSON
                #"Tok\"en\\Sec/ret+pl&us! \u00e9"#,  // JSON, ASCII only (Python)
                #"Tok\"en\\Sec\/ret+pl&us! \u00e9"#,  // PHP
                #"Tok\"en\\Sec/ret+pl\u0026us! é"#,  // Go
                #"Tok\\\"en\\\\Sec/ret+pl&us! é"#,  // JSON inside JSON
                "Tok%22en%5CSec%2Fret%2Bpl%26us%21%20%C3%A9",  // RFC 3986
                "Tok%22en%5cSec%2fret%2bpl%26us%21%20%c3%a9",  // lower-case hex
                "Tok%22en%5CSec%2Fret%2Bpl%26us%21+%C3%A9",  // form
                "Tok%22en%5CSec%2Fret%2Bpl%26us!%20%C3%A9",  // encodeURIComponent
                "Tok%22en%5CSec/ret%2Bpl%26us%21%20%C3%A9",  // path
                "Bearer%20Tok%22en%5CSec%2Fret%2Bpl%26us%21%20%C3%A9",
            ])
        XCTAssertEqual(r.scrub("Bearer of bad news"), "Bearer of bad news", "the scheme alone is no secret")
    }

    func testBasicCredentialsAreKnownDecoded() {
        let r = redactor([("Basic " + Data("alice:s3cret-pw".utf8).base64EncodedString(), .headerValue)])
        assertScrubbed(r, ["alice:s3cret-pw", "s3cret-pw", "alice", "alice%3As3cret-pw", Data("alice:s3cret-pw".utf8).base64EncodedString()])
    }

    func testNameValueParts() {
        let r = redactor([("token=abc123xyz", .headerValue), ("theme=dim; session=\"sess-4242\"", .headerValue)])
        assertScrubbed(r, ["abc123xyz", "token=abc123xyz", "sess-4242"])
        XCTAssertEqual(r.scrub("dim theme"), "dim theme", "parts shorter than 4 characters are not secrets")
    }

    func testAnOpaqueSecretIsNotSplitIntoWords() {
        let r = redactor([("correct horse battery", .opaque)])
        assertScrubbed(r, ["correct horse battery", "correct%20horse%20battery", "correct+horse+battery"])
        XCTAssertEqual(r.scrub("a horse"), "a horse")
        XCTAssertEqual(redactor([("abc", .opaque)]).scrub("abc"), "abc", "too short to be scrubbed")
    }

    func testLongestMatchWinsAndTextAroundIsKept() {
        let r = redactor([("Bearer tok-12345", .headerValue)])
        XCTAssertEqual(r.scrub("auth: Bearer tok-12345, again tok-12345 and tok-1234"), "auth: ‹redacted›, again ‹redacted› and tok-1234")
        XCTAssertEqual(r.scrub("nothing here"), "nothing here")
        XCTAssertEqual(r.scrub("ünïcödé tok-12345 ✓"), "ünïcödé ‹redacted› ✓")
        XCTAssertEqual(Redactor().scrub("tok-12345"), "tok-12345", "a redactor without secrets changes nothing")
    }

    func testBytesAreScrubbedBeforeParsing() throws {
        let r = redactor([("Bearer tok\"12345", .headerValue)])
        let body = Data(#"[{"id":"1","echo":"tok\"12345"}]"#.utf8)
        let scrubbed = r.scrub(body)
        XCTAssertEqual(String(decoding: scrubbed, as: UTF8.self), #"[{"id":"1","echo":"‹redacted›"}]"#)
        XCTAssertNoThrow(try JSONValue.parse(scrubbed), "JSON stays JSON")
    }

    func testExcerptIsScrubbedBeforeItIsCut() {
        let r = redactor([("partial-secret-value", .opaque)])
        // The secret straddles the 200th character: cutting first would leave "partial-sec".
        let body = Data((String(repeating: "x", count: 190) + "partial-secret-value" + String(repeating: "y", count: 50)).utf8)
        let excerpt = r.excerpt(body)
        XCTAssertFalse(excerpt.contains("partial"), excerpt)
        XCTAssertTrue(excerpt.hasSuffix("…"))
        XCTAssertEqual(r.excerpt(Data("a\nb\r\nc".utf8)), "a b  c")
    }

    func testEachByteMayComeRawOrPercentEncoded() {
        let r = redactor([("pa$$w0rd!", .opaque), ("50%off-code", .opaque), ("Bearer tok:en-9", .headerValue)])
        assertScrubbed(
            r,
            [
                "pa$$w0rd%21", "pa%24$w0rd%21", "pa%24%24w0rd!", "%70a$$w0rd%21", "pa$%24w0rd%21",  // some bytes raw, some encoded
                "%70%61%24%24%77%30%72%64%21",  // every byte, even letters
                "50%off-code", "50%25off-code", "%35%30%25off%2Dcode",  // a `%` of the secret, raw or as %25
                "tok%3Aen-9", "tok%3aen-9", "Bearer%20tok%3aen-9",  // either hex case, token parts too
            ])
        XCTAssertEqual(r.scrub("pa$$w0rd%2"), "pa$$w0rd%2", "a secret missing its last byte is no match")
        XCTAssertEqual(r.scrub("pa%24$w0rd"), "pa%24$w0rd")
        XCTAssertEqual(r.scrub("x%25%25%25y 50%2"), "x%25%25%25y 50%2")
    }

    func testConfigURLSplitsUserInfoOffBeforeAnythingParsesIt() {
        let typo = ConfigURL("htps://me:cfg-pa%24%24word@host:8/x?q=1")
        XCTAssertEqual(typo.shown, "htps://me:‹redacted›@host:8/x?q=1")
        XCTAssertEqual(typo.user, "me")
        XCTAssertEqual(typo.password, "cfg-pa$$word")
        XCTAssertEqual(Redactor.shared.scrub("cfg-pa$$word cfg-pa%24%24word"), "‹redacted› ‹redacted›", "known before validation")
        XCTAssertEqual(ConfigURL("u:cfg-nosc-heme@host/x").shown, "u:‹redacted›@host/x")
        XCTAssertEqual(ConfigURL("https://token-as-user@host/x").shown, "https://token-as-user@host/x", "a user name is no secret")
        XCTAssertEqual(ConfigURL("https://h/a@b?c=d").shown, "https://h/a@b?c=d", "an @ in the path is no user info")
        let secret = ConfigURL("https://u:cfg-pw-77@h:9/p/q?key=cfg-key-1&t=ab&token=cfg%2Btok+2#f", secret: true)
        XCTAssertEqual(secret.shown, "https://h:9/p/q")
        XCTAssertEqual(ConfigURL("cfg-not-a-url?token=x", secret: true).shown, "‹redacted›", "a secret that is no URL shows nothing")
        XCTAssertEqual(Redactor.shared.scrub("cfg-key-1 cfg+tok 2 cfg-pw-77 t=ab"), "‹redacted› ‹redacted› ‹redacted› t=ab")
    }

    func testMessagesAreScrubbedBeforeTheyAreCut() {
        let r = redactor([("straddles-the-cut", .opaque)])
        let text = String(repeating: "x", count: 295) + "straddles-the-cut"
        XCTAssertEqual(r.shortened(text, to: 300), String(repeating: "x", count: 295) + "‹reda…")
        XCTAssertEqual(r.shortened("short", to: 300), "short")
        // A Location keeps the mask readable (not percent-encoded) and loses no secret to its cut.
        _ = Secret("location-secret-straddling")
        let location = "http://h/" + String(repeating: "y", count: 270) + "location-secret-straddling\u{1B}"
        XCTAssertEqual(Redirect.display(location), "http://h/" + String(repeating: "y", count: 270) + "‹redacted›%1B")
    }

    func testFormsAreFewForAPlainToken() {
        // A typical API token has one form: the scrubbing table stays small.
        XCTAssertEqual(SecretForms.of("a1b2c3d4e5f6-_.", shape: .opaque).count, 1)
        XCTAssertEqual(
            SecretForms.of("Bearer a1b2c3d4e5f6", shape: .headerValue), ["Bearer a1b2c3d4e5f6", "Bearer%20a1b2c3d4e5f6", "Bearer+a1b2c3d4e5f6", "a1b2c3d4e5f6"])
    }
}
