import Foundation
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The pure parts of the telegram, slack and discord sinks: cutting, payloads, escaping and the
/// mapping of each service's answers (the e2e tests run them against fakes of the services).
final class ChatSinkTests: XCTestCase {
    // MARK: cutting

    func testCutKeepsTextThatFitsAndCountsUTF16() {
        XCTAssertEqual(MarkupCutter.cut("abc", limit: 3, syntax: .markdown), "abc")
        XCTAssertEqual(MarkupCutter.cut("abcd", limit: 3, syntax: .markdown), "ab…")
        // 🚨 is two UTF-16 units: it does not fit in the one unit left before "…".
        XCTAssertEqual(MarkupCutter.cut("a🚨bc", limit: 3, syntax: .markdown), "a…")
        // A character of two scalars is kept whole.
        XCTAssertEqual(MarkupCutter.cut("e\u{301}xyz", limit: 3, syntax: .markdown), "e\u{301}…")
    }

    func testTelegramCutCountsVisibleTextClosesTagsAndKeepsEntitiesWhole() {
        let html = "<b><a href=\"https://x/?a=1&amp;b=2\">Title &amp; more</a></b>\nbody"
        // Visible: "Title & more\nbody" = 17 characters; tags and the href count nothing.
        XCTAssertEqual(MarkupCutter.cut(html, limit: 17, syntax: .telegramHTML), html)
        XCTAssertEqual(
            MarkupCutter.cut(html, limit: 8, syntax: .telegramHTML),
            "<b><a href=\"https://x/?a=1&amp;b=2\">Title &amp;…</a></b>")
        XCTAssertEqual(
            MarkupCutter.cut(html, limit: 7, syntax: .telegramHTML),
            "<b><a href=\"https://x/?a=1&amp;b=2\">Title …</a></b>")
    }

    func testSlackCutNeverSplitsALinkOrAnEntity() {
        let text = "x <https://a.example/|label> &amp; y"
        XCTAssertEqual(MarkupCutter.cut(text, limit: 10, syntax: .slackMrkdwn), "x …")
        XCTAssertEqual(MarkupCutter.cut(text, limit: 33, syntax: .slackMrkdwn), "x <https://a.example/|label> …")
        XCTAssertEqual(MarkupCutter.cut(text, limit: 35, syntax: .slackMrkdwn), "x <https://a.example/|label> &amp;…")
    }

    func testMarkdownCutNeverSplitsAnEscape() {
        XCTAssertEqual(MarkupCutter.cut("ab\\*cd", limit: 4, syntax: .markdown), "ab…")
        XCTAssertEqual(MarkupCutter.cut("ab\\*cd", limit: 5, syntax: .markdown), "ab\\*…")
    }

    // MARK: telegram

    func telegram(_ client: any HTTPClient = Failing(), title: String = "{{title}}") throws -> TelegramSink {
        TelegramSink(
            endpoint: URL(string: "https://api.telegram.org/bot123:SECRETTOKEN/sendMessage")!, chat: .init("-100123"),
            title: try MessageTemplate(title, markup: .html), body: try MessageTemplate("{{body}}", markup: .html), client: client)
    }

    func testTelegramMessageIsHTMLWithMarkLinkAndEscapedText() throws {
        let e = event("1", severity: .critical, title: "<b>x</b> & y", body: "line <i>", url: "https://example.org/?a=1&b=2")
        let m = try telegram().message(for: e)
        XCTAssertEqual(m.text, "🚨 <b><a href=\"https://example.org/?a=1&amp;b=2\">&lt;b&gt;x&lt;/b&gt; &amp; y</a></b>\nline &lt;i&gt;")
        let json = try JSONSerialization.jsonObject(with: try XCTUnwrap(try telegram().request(for: e).body)) as? [String: Any]
        XCTAssertEqual(json?["chat_id"] as? Int, -100123)
        XCTAssertEqual(json?["parse_mode"] as? String, "HTML")
        XCTAssertEqual(json?["link_preview_options"] as? [String: Bool], ["is_disabled": true])
        XCTAssertEqual(try telegram().message(for: event("2", url: "javascript:alert(1)")).text, "ℹ️ <b>t</b>")
    }

    func testTelegramChatIDIsANumberOrAUsername() throws {
        XCTAssertEqual(TelegramSink.ChatID("4242"), .number(4242))
        XCTAssertEqual(TelegramSink.ChatID("@alerts"), .username("@alerts"))
    }

    func testTelegramMessageIsCutToItsVisibleLimit() throws {
        let long = try telegram().message(for: event("1", body: String(repeating: "<&>", count: 2000))).text
        XCTAssertTrue(long.hasSuffix("…"))
        XCTAssertLessThanOrEqual(
            long.replacingOccurrences(of: "<b>", with: "").replacingOccurrences(of: "</b>", with: "")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&").utf16
                .count, 4096)
    }

    func testTelegramAnswers() throws {
        let sink = try telegram()
        func judge(_ status: Int, _ body: String, _ headers: [String: String] = [:]) -> DeliveryError? {
            failure(sink.judge, sink.delivery, sink.endpoint, HTTPResponse(status: status, headers: headers, body: Data(body.utf8)))
        }
        XCTAssertNil(judge(200, #"{"ok":true,"result":{}}"#))
        let limited = judge(429, #"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#)
        XCTAssertEqual(limited?.category, .retryable)
        XCTAssertEqual(limited?.retryAfter, 7)
        XCTAssertEqual(judge(429, "not json", ["retry-after": "3"])?.retryAfter, 3)
        XCTAssertEqual(judge(401, #"{"ok":false,"error_code":401,"description":"Unauthorized"}"#)?.category, .gone)
        let blocked = judge(403, #"{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}"#)
        XCTAssertEqual(blocked?.category, .gone)
        XCTAssertTrue(blocked!.message.contains("bot was blocked by the user"))
        XCTAssertEqual(judge(404, #"{"ok":false,"error_code":404,"description":"Not Found"}"#)?.category, .gone)
        XCTAssertEqual(judge(400, #"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#)?.category, .gone)
        let migrated = judge(
            400,
            #"{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1009}}"#
        )
        XCTAssertEqual(migrated?.category, .gone)
        XCTAssertTrue(migrated!.message.contains("set chat_id = -1009"))
        XCTAssertEqual(judge(400, #"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities"}"#)?.category, .permanent)
        XCTAssertEqual(judge(502, "<html>bad gateway</html>")?.category, .retryable)
        for status in [401, 403, 404, 429, 500] {
            XCTAssertFalse(judge(status, "{}")!.message.contains("SECRETTOKEN"), "\(status)")
            XCTAssertTrue(judge(status, "{}")!.message.hasPrefix("telegram sendMessage at api.telegram.org: HTTP \(status)"))
        }
    }

    // MARK: slack

    func slack() throws -> SlackSink {
        SlackSink(
            url: URL(string: "https://hooks.slack.com/services/T0/B0/SECRETSECRETSECRET")!,
            title: try MessageTemplate("{{title}}", markup: .slack), body: try MessageTemplate("{{body}}", markup: .slack), client: Failing())
    }

    func testSlackPayloadIsMrkdwnTextAndOneSectionWithAnEscapedLink() throws {
        let e = event("1", severity: .warning, title: "<!channel> & co", body: "<@U1>", url: "https://example.org/a?b=1&c=2|x>y")
        let p = try slack().payload(for: e)
        XCTAssertEqual(p.text, "⚠️ *<https://example.org/a?b=1&amp;c=2%7Cx%3Ey|&lt;!channel&gt; &amp; co>*\n&lt;@\u{2060}U1&gt;")
        let json = try JSONSerialization.jsonObject(with: try XCTUnwrap(try slack().request(for: e).body)) as? [String: Any]
        let blocks = json?["blocks"] as? [[String: Any]]
        XCTAssertEqual(blocks?.first?["type"] as? String, "section")
        XCTAssertEqual((blocks?.first?["text"] as? [String: String])?["text"], p.text)
        XCTAssertEqual((blocks?.first?["text"] as? [String: String])?["type"], "mrkdwn")
        XCTAssertEqual(try slack().payload(for: event("2")).text, "ℹ️ *t*")
    }

    func testSlackAnswers() throws {
        let sink = try slack()
        func judge(_ status: Int, _ body: String, _ headers: [String: String] = [:]) -> DeliveryError? {
            failure(sink.judge, sink.delivery, sink.url, HTTPResponse(status: status, headers: headers, body: Data(body.utf8)))
        }
        XCTAssertNil(judge(200, "ok"))
        XCTAssertEqual(judge(400, "invalid_payload")?.category, .permanent)
        XCTAssertEqual(judge(400, "user_not_found")?.category, .gone)
        XCTAssertEqual(judge(403, "action_prohibited")?.category, .gone)
        XCTAssertEqual(judge(404, "channel_not_found")?.category, .gone)
        XCTAssertEqual(judge(404, "no_service")?.category, .gone)
        XCTAssertEqual(judge(404, "anything")?.category, .gone)
        let archived = judge(410, "channel_is_archived")
        XCTAssertEqual(archived?.category, .gone)
        XCTAssertTrue(archived!.message.contains("channel is archived"))
        XCTAssertEqual(judge(429, "rate_limited", ["retry-after": "30"])?.retryAfter, 30)
        XCTAssertEqual(judge(500, "")?.category, .retryable)
        XCTAssertEqual(judge(500, "")?.message, "slack webhook at hooks.slack.com: HTTP 500")
    }

    // MARK: discord

    func discord() throws -> DiscordSink {
        DiscordSink(
            url: URL(string: "https://discord.com/api/webhooks/1/SECRETSECRETSECRET?thread_id=9&wait=false")!,
            title: try MessageTemplate("{{title}}", markup: .markdown), body: try MessageTemplate("{{body}}", markup: .markdown), client: Failing())
    }

    func testDiscordPayloadIsOneEmbedWithColourLinkAndNoMentions() throws {
        let e = event("1", severity: .critical, title: "@everyone ](http://evil)", body: "**b**", url: "https://example.org/a")
        let json = try JSONSerialization.jsonObject(with: try XCTUnwrap(try discord().request(for: e).body)) as? [String: Any]
        XCTAssertEqual(json?["allowed_mentions"] as? [String: [String]], ["parse": []])
        let embed = (json?["embeds"] as? [[String: Any]])?.first
        XCTAssertEqual(embed?["title"] as? String, "🚨 \\@everyone \\]\\(http://evil\\)")
        XCTAssertEqual(embed?["description"] as? String, "\\*\\*b\\*\\*")
        XCTAssertEqual(embed?["url"] as? String, "https://example.org/a")
        XCTAssertEqual(embed?["color"] as? Int, 0xE74C3C)
        XCTAssertEqual(embed?["timestamp"] as? String, "2023-11-14T22:13:20Z")
        XCTAssertNil(json?["content"])
        let query = URLComponents(url: try discord().request(for: e).url, resolvingAgainstBaseURL: false)?.queryItems
        XCTAssertEqual(query, [URLQueryItem(name: "thread_id", value: "9"), URLQueryItem(name: "wait", value: "true")])
    }

    func testDiscordEmbedIsCutToItsLimits() throws {
        let p = try discord().payload(for: event("1", title: String(repeating: "x", count: 300), body: String(repeating: "y", count: 5000)))
        let title = try XCTUnwrap(p.embeds.first).title
        XCTAssertEqual(title.utf16.count, 256)
        XCTAssertTrue(title.hasSuffix("x…"))
        XCTAssertEqual(p.embeds.first?.description?.utf16.count, 4096)
    }

    func testDiscordAnswers() throws {
        let sink = try discord()
        func judge(_ status: Int, _ body: String, _ headers: [String: String] = [:]) -> DeliveryError? {
            failure(sink.judge, sink.delivery, sink.url, HTTPResponse(status: status, headers: headers, body: Data(body.utf8)))
        }
        XCTAssertNil(judge(204, ""))
        XCTAssertNil(judge(200, #"{"id":"1"}"#))
        // The longest of the body's retry_after and the headers wins.
        XCTAssertEqual(judge(429, #"{"message":"You are being rate limited.","retry_after":2.5,"global":false}"#)?.retryAfter, 2.5)
        XCTAssertEqual(judge(429, #"{"retry_after":2.5}"#, ["retry-after": "3"])?.retryAfter, 3)
        XCTAssertEqual(judge(429, "{}", ["x-ratelimit-reset-after": "4.25"])?.retryAfter, 4.25)
        XCTAssertEqual(judge(429, #"{"retry_after":1e300}"#)?.retryAfter, HTTPResponse.maxRetryAfter)
        XCTAssertEqual(judge(404, #"{"message":"Unknown Webhook","code":10015}"#)?.category, .gone)
        XCTAssertEqual(judge(401, #"{"message":"Invalid Webhook Token","code":50027}"#)?.category, .gone)
        XCTAssertEqual(judge(403, #"{"message":"Missing Permissions","code":50013}"#)?.category, .gone)
        XCTAssertEqual(judge(400, #"{"message":"Invalid Form Body","code":50035}"#)?.category, .permanent)
        XCTAssertEqual(judge(503, "")?.category, .retryable)
        XCTAssertFalse(judge(404, "")!.message.contains("SECRET"))
    }

    // MARK: configuration

    func testWebhookURLsAreSecretsAndNeedHTTPSOffLoopback() throws {
        let bad = try configErrors(
            """
            [sinks.s]
            type = "slack"
            url = "http://hooks.example.org/services/T/B/SECRETSECRETSECRETXX"
            [sinks.d]
            type = "discord"
            url = "not a url SECRETSECRETSECRETYY"
            [sinks.t]
            type = "telegram"
            bot_token = "123:abc/def"
            chat_id = 1
            api_url = "http://api.example.org"
            """)
        let text = bad.map(\.description).joined(separator: "\n")
        XCTAssertEqual(bad.count, 3, text)
        XCTAssertTrue(text.contains("'url' must use https://"), text)
        XCTAssertTrue(text.contains("'url' must be an https:// URL"), text)
        XCTAssertTrue(text.contains("'bot_token' is not a Telegram bot token"), text)
        XCTAssertFalse(text.contains("SECRETSECRET"), text)
        XCTAssertFalse(text.contains("abc/def"), text)

        XCTAssertEqual(
            try configErrors(
                """
                [sinks.s]
                type = "slack"
                url = "http://127.0.0.1:9/services/T/B/x"
                [sinks.d]
                type = "discord"
                url = "https://discord.com/api/webhooks/1/x"
                title_template = "{{#title}}"
                [sinks.t]
                type = "telegram"
                bot_token = "123:abc"
                chat_id = "@alerts"
                """
            ).map(\.description).count, 1, "only the unclosed section of the template")
        XCTAssertEqual(
            try configErrors(
                """
                [sinks.t]
                type = "telegram"
                bot_token = "123:abc"
                """
            ).first?.description.contains("missing required key 'chat_id'"), true)
    }
}

/// What the outbox sees of an answer: the channel's own judgement, else ``HTTPDelivery``'s.
private func failure(_ judge: (HTTPResponse) -> HTTPDelivery.Outcome?, _ delivery: HTTPDelivery, _ url: URL, _ r: HTTPResponse) -> DeliveryError? {
    guard case .failed(let e) = judge(r) ?? delivery.outcome(of: r, url: url) else { return nil }
    return e
}
