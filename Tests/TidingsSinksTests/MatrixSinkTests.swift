import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite
@testable import TidingsSinks

final class MatrixSinkTests: XCTestCase {
    func sink(
        room: String = "!room:example.org", kind: MatrixMessage.Kind = .text, name: String = "mx",
        client: any HTTPClient = Failing()
    ) throws -> MatrixSink {
        MatrixSink(
            homeserver: URL(string: "https://matrix.example.org")!, accessToken: Secret("syt_secret_token_1234"),
            room: MatrixRoom(room)!,
            message: MatrixMessage(kind: kind, title: try pair("{{title}}"), body: try pair("{{body}}")),
            sinkName: name, client: client)
    }

    func pair(_ source: String) throws -> MarkupPair {
        MarkupPair(plain: try MessageTemplate(source, markup: .plain), html: try MessageTemplate(source, markup: .html))
    }

    func testRoomIdsAndAliases() {
        XCTAssertEqual(MatrixRoom("!abc:example.org"), .id("!abc:example.org"))
        XCTAssertEqual(MatrixRoom("!abcV12roomid"), .id("!abcV12roomid"))
        XCTAssertEqual(MatrixRoom("#alerts:example.org"), .alias("#alerts:example.org"))
        for bad in ["", "!", "#alerts", "#:example.org", "#alerts:", "alerts:example.org", "!a b:c", "@bot:example.org"] {
            XCTAssertNil(MatrixRoom(bad), bad)
        }
    }

    /// The same event to the same room by the same sink: the same transaction id, on every retry
    /// and after a restart; anything else differs.
    func testTransactionIDIsStablePerEventRoomAndSink() throws {
        let a = try sink()
        let e = event("01A")
        XCTAssertEqual(a.transactionID(for: e), try sink().transactionID(for: e))
        XCTAssertNotEqual(a.transactionID(for: e), a.transactionID(for: event("01B")))
        XCTAssertNotEqual(a.transactionID(for: e), try sink(room: "!other:example.org").transactionID(for: e))
        XCTAssertNotEqual(a.transactionID(for: e), try sink(name: "mx2").transactionID(for: e))
        XCTAssertTrue(a.transactionID(for: e).allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") })
        // The id a homeserver already saw from an earlier build: the first 16 bytes of
        // SHA-256("mx\n!room:example.org\n01A") in hex (Python's hashlib).
        XCTAssertEqual(a.transactionID(for: e), "tidings-2f76d1dac617b5dcb784da7ef49f99f4")
    }

    func testSendRequestPathHeadersAndBody() throws {
        let s = try sink()
        let e = event("01A", severity: .critical, title: "Disk <full> & \"hot\"", body: "line 1\nline <2>", url: "https://example.org/a?b=1&c=2")
        let r = s.sendRequest(e, roomID: "!room/x:example.org")
        XCTAssertEqual(r.method, "PUT")
        XCTAssertEqual(r.redirects, .never)
        XCTAssertEqual(
            r.url.absoluteString,
            "https://matrix.example.org/_matrix/client/v3/rooms/%21room%2Fx%3Aexample.org/send/m.room.message/\(s.transactionID(for: e))")
        XCTAssertFalse(r.url.absoluteString.contains("syt_secret"), "the token is never in a URL")
        XCTAssertEqual(r.headers.first { $0.0 == "Authorization" }?.1, "Bearer syt_secret_token_1234")
        var content = try XCTUnwrap(JSONSerialization.jsonObject(with: r.body!) as? [String: Any])
        // Intentional mentions (issue 20, item 5): the message mentions nobody, so `@room` or a
        // display name in remote text highlights no one.
        XCTAssertEqual((content.removeValue(forKey: "m.mentions") as? [String: Any])?.count, 0)
        let fields = try XCTUnwrap(content as? [String: String])
        XCTAssertEqual(fields["msgtype"], "m.text")
        XCTAssertEqual(fields["body"], "Critical: Disk <full> & \"hot\"\nline 1\nline <2>\nhttps://example.org/a?b=1&c=2")
        XCTAssertEqual(fields["format"], "org.matrix.custom.html")
        XCTAssertEqual(
            fields["formatted_body"],
            "<strong><font color=\"#d00000\" data-mx-color=\"#d00000\">Critical:</font> Disk &lt;full&gt; &amp; &quot;hot&quot;</strong>"
                + "<br>line 1<br>\nline &lt;2&gt;<br><a href=\"https://example.org/a?b=1&amp;c=2\">https://example.org/a?b=1&amp;c=2</a>")
    }

    func testInfoHasNoLabelNoticeTypeAndNoLinkForOtherSchemes() throws {
        let s = try sink(kind: .notice)
        let content = s.message.content(for: event("1", title: "Hello", url: "javascript:alert(1)"))
        XCTAssertEqual(content.msgtype, "m.notice")
        XCTAssertEqual(content.body, "Hello")
        XCTAssertEqual(content.formatted_body, "<strong>Hello</strong>")
    }

    func testAliasRequestEncodesTheAlias() throws {
        let r = try sink(room: "#alerts:example.org").aliasRequest("#alerts:example.org")
        XCTAssertEqual(r.method, "GET")
        XCTAssertEqual(r.url.absoluteString, "https://matrix.example.org/_matrix/client/v3/directory/room/%23alerts%3Aexample.org")
    }

    func testOversizedMessageLosesItsHTMLAndIsCutWithAnEllipsis() throws {
        let long = String(repeating: "é\"", count: 40_000)
        let content = try sink().message.content(for: event("1", title: "t", body: long))
        XCTAssertNil(content.formatted_body)
        XCTAssertNil(content.format)
        XCTAssertLessThanOrEqual(content.json.count, MatrixMessage.maxContentBytes)
        XCTAssertGreaterThan(content.json.count, MatrixMessage.maxContentBytes - 1000)
        XCTAssertTrue(content.body.hasSuffix("…"))
        XCTAssertTrue(long.hasPrefix(String(content.body.dropFirst(2).dropLast())))
    }

    func testMatrixErrorsAreReadFromTheBody() throws {
        let s = try sink()
        func judge(_ status: Int, _ body: String, _ headers: [String: String] = [:], step: MatrixSink.Step = .sending) -> DeliveryError? {
            if case .failed(let e) = s.judge(while: step)(HTTPResponse(status: status, headers: headers, body: Data(body.utf8))) { return e }
            return nil
        }
        let limited = judge(429, #"{"errcode":"M_LIMIT_EXCEEDED","error":"Too Many Requests","retry_after_ms":2500}"#)
        XCTAssertEqual(limited?.category, .retryable)
        XCTAssertEqual(limited?.retryAfter, 2.5)
        XCTAssertTrue(limited!.message.contains("M_LIMIT_EXCEEDED"), limited!.message)
        XCTAssertEqual(judge(429, #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":2500}"#, ["retry-after": "7"])?.retryAfter, 7)
        XCTAssertEqual(judge(429, "")?.retryAfter, nil)

        let token = judge(401, #"{"errcode":"M_UNKNOWN_TOKEN","error":"Invalid access token passed.","soft_logout":false}"#)
        XCTAssertEqual(token?.category, .gone)
        XCTAssertTrue(token!.message.contains("M_UNKNOWN_TOKEN: Invalid access token passed."), token!.message)
        XCTAssertEqual(judge(401, #"{"errcode":"M_MISSING_TOKEN","error":"Missing access token"}"#)?.category, .gone)

        let forbidden = judge(403, #"{"errcode":"M_FORBIDDEN","error":"User @bot:example.org not in room !room:example.org"}"#)
        XCTAssertEqual(forbidden?.category, .gone)
        XCTAssertTrue(forbidden!.message.contains("not allowed to post in !room:example.org"), forbidden!.message)

        let noAlias = judge(404, #"{"errcode":"M_NOT_FOUND","error":"Room alias not found"}"#, step: .resolvingAlias("#a:b"))
        XCTAssertEqual(noAlias?.category, .gone)
        XCTAssertTrue(noAlias!.message.contains("no room has the alias #a:b"), noAlias!.message)

        XCTAssertNil(judge(500, #"{"errcode":"M_UNKNOWN"}"#), "5xx: the standard mapping (retryable)")
        XCTAssertNil(judge(200, "{}"))
        let echoed = judge(401, #"{"errcode":"M_UNKNOWN_TOKEN","error":"bad token syt_secret_token_1234"}"#)
        XCTAssertFalse(echoed!.message.contains("syt_secret_token_1234"), echoed!.message)
    }

    func testConfigErrorsNameTheLine() throws {
        let errors = try configErrors(
            """
            [sinks.mx]
            type = "matrix"
            homeserver = "ftp://matrix.example.org"
            access_token_env = "MX_TOKEN_NOT_SET_ANYWHERE"
            room = "alerts"
            msgtype = "m.emote"
            title_template = "{{#x}}"
            """)
        let text = errors.map(\.description).joined(separator: "\n")
        XCTAssertTrue(text.contains(":3:") && text.contains("'homeserver' must be an http:// or https:// URL"), text)
    }
}
