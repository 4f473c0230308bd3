import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite
@testable import TidingsSinks

/// The phone-push channels' pure parts: cutting, text, request building, severity mapping and
/// how each service's answers are judged. (End to end against fakes: Tests/e2e/test_ntfy.py,
/// test_gotify.py, test_pushover.py.)
final class PushSinkTests: XCTestCase {
    // MARK: LengthLimit

    func testCutKeepsWholeCharactersAndSaysSo() {
        let family = "👨‍👩‍👧"  // one grapheme, 5 scalars, 18 bytes
        let chars = LengthLimit(8, .characters)
        XCTAssertEqual(chars.cut("abcdefgh"), "abcdefgh", "exactly at the limit: unchanged")
        XCTAssertEqual(chars.cut("abcdefghi"), "abcdefg…")
        XCTAssertEqual(LengthLimit(6, .characters).cut("ab" + family + "cdef"), "ab…", "never inside a grapheme")
        XCTAssertEqual(chars.cut("abc    defghij"), "abc…", "no whitespace before the mark")
        let bytes = LengthLimit(10, .utf8Bytes)
        XCTAssertEqual(bytes.cut("åäöåäöåäö"), "åäö…", "3 × 2 bytes + 3 for the mark")
        for text in ["åäöåäöåäö", "e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}", family + family] {
            let cut = bytes.cut(text)
            XCTAssertLessThanOrEqual(cut.utf8.count, 10, text)
            XCTAssertTrue(cut.hasSuffix("…"), text)
            XCTAssertTrue(text.hasPrefix(String(cut.dropLast())), "a prefix of whole characters: \(cut)")
        }
        let json = LengthLimit(12, .jsonBytes)
        XCTAssertEqual(json.measure("a\"b\n\u{1}"), 1 + 2 + 1 + 2 + 6)
        let cut = json.cut(String(repeating: "\"", count: 20))
        XCTAssertLessThanOrEqual(JSONValue.string(cut).jsonString().utf8.count - 2, 12)
        XCTAssertTrue(json.fits("short") && !json.fits(String(repeating: "x", count: 13)))
    }

    // MARK: PushText

    func testTitleBecomesTheMessageWhenTheBodyIsBlank() throws {
        let text = try PushText(title: MessageTemplate("{{title}}", markup: .plain), body: MessageTemplate("{{body}}", markup: .plain))
        let limit = LengthLimit(100, .characters)
        XCTAssertEqual(text.render(event("1", title: "Hej <b>&", body: "Body"), title: limit, message: limit), .init(title: "Hej <b>&", message: "Body"))
        XCTAssertEqual(text.render(event("1", title: "Only a title", body: " \n"), title: limit, message: limit), .init(title: nil, message: "Only a title"))
        let blank = try PushText(title: MessageTemplate("{{nothing}}", markup: .plain), body: MessageTemplate("", markup: .plain))
        XCTAssertEqual(blank.render(event("1", title: "T"), title: limit, message: limit).message, "T", "never an empty message")
        XCTAssertEqual(blank.render(event("1", title: ""), title: limit, message: limit).message, "k1")
        XCTAssertEqual(text.render(event("1", title: "t", body: String(repeating: "x", count: 200)), title: limit, message: limit).message.count, 100)
    }

    func testOnlyWholeWebLinksBecomeTapActions() {
        let limit = LengthLimit(40, .utf8Bytes)
        XCTAssertEqual(PushText.link(event("1", url: "https://example.org/a"), limit: limit), "https://example.org/a")
        for bad in ["javascript:alert(1)", "intent://x#Intent;end", "file:///etc/passwd", "https://example.org/" + String(repeating: "a", count: 40)] {
            XCTAssertNil(PushText.link(event("1", url: bad), limit: limit), bad)
        }
        XCTAssertNil(PushText.link(event("1"), limit: limit))
    }

    // MARK: ntfy

    func testNtfyPublishesJSONToTheServerRoot() throws {
        let sink = NtfySink(
            server: URL(string: "https://ntfy.example/base")!, topic: "alerts", auth: .header(Secret("Bearer tk_secret1", shape: .headerValue)),
            tags: ["bell"], text: try defaultText(), client: Failing())
        let r = sink.request(event("1", severity: .warning, title: "Påminnelse \"x\"", body: "line 1\nline 2", url: "https://example.org/a"))
        XCTAssertEqual(r.method, "POST")
        XCTAssertEqual(r.url.absoluteString, "https://ntfy.example/base/")
        XCTAssertEqual(r.redirects, .never)
        XCTAssertEqual(header(r, "authorization"), "Bearer tk_secret1")
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: r.body!) as? [String: Any])
        XCTAssertEqual(body["topic"] as? String, "alerts")
        XCTAssertEqual(body["title"] as? String, "Påminnelse \"x\"")
        XCTAssertEqual(body["message"] as? String, "line 1\nline 2")
        XCTAssertEqual(body["priority"] as? Int, 4)
        XCTAssertEqual(body["tags"] as? [String], ["bell"])
        XCTAssertEqual(body["click"] as? String, "https://example.org/a")
        XCTAssertNil(body["markdown"], "plain text: remote markdown is shown, not rendered")
        XCTAssertEqual(
            NtfySink(server: NtfySink.defaultServer, topic: "t", text: try defaultText(), client: Failing()).publishURL.absoluteString, "https://ntfy.sh/")
        XCTAssertEqual([Severity.info, .warning, .critical].map(NtfySink.priority), [3, 4, 5])
    }

    func testNtfyBodyStaysWithinTheServersLimits() throws {
        let sink = NtfySink(server: NtfySink.defaultServer, topic: "t", text: try defaultText(), client: Failing())
        let huge = String(repeating: "\"\u{1}ö", count: 5000)
        let r = sink.request(event("1", title: huge, body: huge, url: "https://example.org/" + String(repeating: "a", count: 4000)))
        XCTAssertLessThanOrEqual(r.body!.count, 8192, "ntfy reads at most twice its 4,096-byte message limit as JSON")
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: r.body!) as? [String: Any])
        XCTAssertLessThanOrEqual((body["message"] as! String).utf8.count, 4096)
        XCTAssertTrue((body["message"] as! String).hasSuffix("…"))
        XCTAssertNil(body["click"], "a URL too long to send whole is left out")
    }

    func testNtfyOptions() throws {
        /// The config errors of an ntfy sink table, as text.
        func errs(_ sink: String) throws -> String {
            try configErrors("[sinks.n]\ntype = \"ntfy\"\n" + sink).map(\.description).joined(separator: "\n")
        }
        XCTAssertEqual(try errs("topic = \"alerts\"\ntoken = \"tk_x1234\""), "")
        XCTAssertEqual(try errs("topic = \"alerts\"\nusername = \"phil\"\npassword = \"pw1234\""), "")
        let expected = [
            "topic = \"a/b\"": ":3: sink \"n\": 'topic' must be 1 to 64",
            "topic = \"a\"\ntoken = \"tk_x1234\"\nusername = \"u\"\npassword = \"pw1234\"": "either 'token' or 'username' + 'password'",
            "topic = \"a\"\nusername = \"u\"": "'username' needs 'password'",
            "topic = \"a\"\nurl = \"ftp://x\"": ":4: sink \"n\": 'url' must be an http:// or https:// URL",
            "topic = \"a\"\nurl = \"https://u:p@x\"": "must not carry a user name or password",
            "topic = \"a\"\ntitle_template = \"{{#x}}\"": ":4: sink \"n\": 'title_template' is not a valid Mustache template",
            "topic = \"a\"\npriority = 5": "unknown key 'priority'",
        ]
        for (table, message) in expected {
            let text = try errs(table)
            XCTAssertTrue(text.contains(message), "\(table): \(text)")
        }
    }

    func testNtfyAnswers() async throws {
        let sink = { (r: HTTPResponse) in NtfySink(server: NtfySink.defaultServer, topic: "t", text: try self.defaultText(), client: Canned(r)) }
        try await sink(json(200, #"{"id":"abc","time":1,"expires":2,"event":"message","topic":"t","message":"m"}"#)).deliver([event("1")])
        let unauthorized = try await failure(
            sink(json(401, #"{"code":40101,"http":401,"error":"unauthorized","link":"https://ntfy.sh/docs/publish/#authentication"}"#)))
        XCTAssertEqual(unauthorized?.category, .gone)
        XCTAssertTrue(unauthorized!.message.contains("HTTP 401") && unauthorized!.message.contains("unauthorized"), unauthorized!.message)
        let f1 = try await failure(sink(json(429, #"{"code":42901,"http":429,"error":"limit reached: too many requests"}"#)))
        XCTAssertEqual(f1?.category, .retryable)
        let f2 = try await failure(sink(json(413, #"{"code":41303,"http":413,"error":"JSON body too large"}"#)))
        XCTAssertEqual(f2?.category, .permanent)
        let notNtfy = try await failure(sink(HTTPResponse(status: 200, headers: [:], body: Data("<html>hello</html>".utf8))))
        XCTAssertEqual(notNtfy?.category, .gone)
        XCTAssertTrue(notNtfy!.message.contains("not an ntfy message envelope"), notNtfy!.message)
    }

    // MARK: Gotify

    func testGotifySendsTheTokenAsAHeaderOnly() throws {
        let sink = GotifySink(server: URL(string: "https://push.example/gotify/")!, token: Secret("AppTok3n.x"), text: try defaultText(), client: Failing())
        let r = sink.request(event("1", severity: .critical, title: "T", body: "**not bold**", url: "https://example.org/a"))
        XCTAssertEqual(r.url.absoluteString, "https://push.example/gotify/message")
        XCTAssertEqual(header(r, "x-gotify-key"), "AppTok3n.x")
        XCTAssertFalse(r.url.absoluteString.contains("AppTok3n"))
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: r.body!) as? [String: Any])
        XCTAssertEqual(body["title"] as? String, "T")
        XCTAssertEqual(body["message"] as? String, "**not bold**")
        XCTAssertEqual(body["priority"] as? Int, 10)
        let extras = try XCTUnwrap(body["extras"] as? [String: [String: Any]])
        XCTAssertEqual(extras["client::display"]?["contentType"] as? String, "text/plain")
        XCTAssertEqual((extras["client::notification"]?["click"] as? [String: String])?["url"], "https://example.org/a")
        XCTAssertEqual([Severity.info, .warning, .critical].map(GotifySink.priority), [5, 8, 10])
        let noLink = sink.request(event("1", url: "javascript:x"))
        XCTAssertNil((try JSONSerialization.jsonObject(with: noLink.body!) as? [String: [String: Any]])?["extras"]?["client::notification"])
    }

    func testGotifyAnswers() async throws {
        let sink = { (r: HTTPResponse) in
            GotifySink(server: URL(string: "http://g")!, token: Secret("AppTok3n.y"), text: try self.defaultText(), client: Canned(r))
        }
        try await sink(json(200, #"{"id":7,"appid":1,"message":"m","title":"t","priority":5,"date":"2026-01-01T00:00:00Z"}"#)).deliver([event("1")])
        let e = try await failure(
            sink(
                json(
                    401,
                    #"{"error":"Unauthorized","errorCode":401,"errorDescription":"you need to provide a valid access token or user credentials to access this api"}"#
                )))
        XCTAssertEqual(e?.category, .gone)
        XCTAssertTrue(e!.message.contains("valid access token"), e!.message)
        let f3 = try await failure(sink(json(400, #"{"error":"Bad Request","errorCode":400,"errorDescription":"Field 'message' is required"}"#)))
        XCTAssertEqual(f3?.category, .permanent)
        let f4 = try await failure(sink(HTTPResponse(status: 200, headers: [:], body: Data("ok".utf8))))
        XCTAssertEqual(f4?.category, .gone)
    }

    // MARK: Pushover

    func testPushoverBody() throws {
        let sink = PushoverSink(
            userKey: Secret("uQiRzpo4DXghDmr9QzzfQu27cmVRsG"), apiToken: Secret("azGDORePK8gMaC0QOYAMyEEuzJnyUi"), text: try defaultText(), client: Failing())
        let e = event(
            "1", severity: .warning, title: String(repeating: "t", count: 300), body: String(repeating: "ä", count: 2000), url: "https://example.org/a")
        let r = sink.request(e)
        XCTAssertEqual(r.url.absoluteString, "https://api.pushover.net/1/messages.json")
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: r.body!) as? [String: Any])
        XCTAssertEqual(body["token"] as? String, "azGDORePK8gMaC0QOYAMyEEuzJnyUi")
        XCTAssertEqual(body["user"] as? String, "uQiRzpo4DXghDmr9QzzfQu27cmVRsG")
        XCTAssertEqual((body["title"] as? String)?.unicodeScalars.count, 250)
        XCTAssertEqual((body["message"] as? String)?.unicodeScalars.count, 1024)
        XCTAssertEqual(body["priority"] as? Int, 1)
        XCTAssertEqual(body["url"] as? String, "https://example.org/a")
        XCTAssertEqual(body["timestamp"] as? Int, 1_700_000_000)
        XCTAssertNil(body["html"])
        XCTAssertEqual([Severity.info, .warning, .critical].map(PushoverSink.priority), [0, 1, 1], "never 2 (emergency)")
        let long = sink.request(event("1", url: "https://example.org/" + String(repeating: "a", count: 500)))
        XCTAssertNil((try JSONSerialization.jsonObject(with: long.body!) as? [String: Any])?["url"])
    }

    func testPushoverAnswers() async throws {
        let sink = { (r: HTTPResponse) in
            PushoverSink(
                userKey: Secret("uQiRzpo4DXghDmr9QzzfQu27cmVRs1"), apiToken: Secret("azGDORePK8gMaC0QOYAMyEEuzJnyU1"), text: try self.defaultText(),
                client: Canned(r))
        }
        try await sink(json(200, #"{"status":1,"request":"647d2300-702c-4b38-8b2f-d56326ae460b"}"#)).deliver([event("1")])
        let token = try await failure(
            sink(json(400, #"{"token":"invalid","errors":["application token is invalid, see https://pushover.net/api"],"status":0,"request":"r"}"#)))
        XCTAssertEqual(token?.category, .gone)
        XCTAssertTrue(token!.message.contains("application token is invalid") && token!.message.contains("api_token is invalid"), token!.message)
        let user = try await failure(
            sink(json(400, #"{"user":"invalid","errors":["user identifier is not a valid user, group, or subscribed user key"],"status":0,"request":"r"}"#)))
        XCTAssertEqual(user?.category, .gone)
        XCTAssertTrue(user!.message.contains("user_key is invalid"), user!.message)
        let blank = try await failure(sink(json(400, #"{"message":"cannot be blank","errors":["message cannot be blank"],"status":0,"request":"r"}"#)))
        XCTAssertEqual(blank?.category, .permanent)
        XCTAssertTrue(blank!.message.contains("message cannot be blank"), blank!.message)
        let reset = Int(Date().timeIntervalSince1970) + 3600
        let limited = try await failure(
            sink(
                json(
                    429, #"{"errors":["application is over its message limit"],"status":0,"request":"r"}"#,
                    ["x-limit-app-limit": "10000", "x-limit-app-remaining": "0", "x-limit-app-reset": "\(reset)"])))
        XCTAssertEqual(limited?.category, .retryable)
        XCTAssertEqual(limited?.retryAfter ?? 0, 3600, accuracy: 5)
        XCTAssertTrue(limited!.message.contains("monthly limit of 10000 messages is used up until"), limited!.message)
        let server = try await failure(sink(HTTPResponse(status: 503, headers: [:], body: Data("<html>down</html>".utf8))))
        XCTAssertEqual(server?.category, .retryable)
        XCTAssertEqual(server?.retryAfter, 5, "no more than once every 5 seconds")
        let f5 = try await failure(sink(json(200, #"{"status":0}"#)))
        XCTAssertEqual(f5?.category, .gone)
    }

    // MARK: helpers

    private func defaultText() throws -> PushText {
        PushText(title: try MessageTemplate("{{title}}", markup: .plain), body: try MessageTemplate("{{body}}", markup: .plain))
    }

    private func header(_ r: HTTPRequest, _ name: String) -> String? { r.headers.first { $0.0.lowercased() == name }?.1 }

    private func json(_ status: Int, _ body: String, _ headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers.merging(["content-type": "application/json"]) { a, _ in a }, body: Data(body.utf8))
    }

    /// The error delivering one event through `sink` ends in, or nil if it was delivered.
    private func failure(_ sink: any Sink) async -> DeliveryError? {
        do {
            try await sink.deliver([event("1")])
            return nil
        } catch {
            return error as? DeliveryError
        }
    }
}

/// Answers every request with one response.
private struct Canned: HTTPClient {
    let response: HTTPResponse
    init(_ response: HTTPResponse) { self.response = response }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse { response }
}
