import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite
@testable import TidingsSinks

/// How a digest (quiet hours, group_wait) reads in each channel that shows it as one message:
/// the shared lines (DigestText), escaping, cutting to each channel's limit, "came and went".
/// (End to end: Tests/e2e/test_attention.py.)
final class DigestTextTests: XCTestCase {
    /// An item's event: `key` names the item, so two events with one key are one line.
    func item(
        _ id: String, key: String, _ type: EventType = .new, severity: Severity = .info, title: String? = nil,
        url: String? = nil, source: String = "helpdesk"
    ) -> Event {
        Event(
            id: id, source: source, provider: "exec", kind: "message", event: type, key: key, title: title ?? "item \(key)",
            url: url, severity: severity, observedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(id.count)))
    }

    func digest(_ events: [Event], reason: Digest.Reason = .quietHours, id: String = "dg-1") -> Digest {
        Digest(id: id, reason: reason, events: events)
    }

    let plainTitle = MessageTemplate.builtin("{{title}}", markup: .plain)
    let htmlTitle = MessageTemplate.builtin("{{title}}", markup: .html)

    /// Twenty items: twenty lines, each `[severity] title (what)`.
    func many(_ n: Int, title: (Int) -> String = { "Item number \($0)" }) -> Digest {
        digest((1...n).map { item("e\($0)", key: "k\($0)", severity: $0 == 7 ? .critical : .info, title: title($0)) }, reason: .grouped)
    }

    // MARK: the shared lines

    func testOneLinePerItemWithSeverityTitleWhatHappenedAndLink() {
        let d = digest([
            item("1", key: "a", severity: .warning, title: "Disk full", url: "https://example.org/a?x=1&y=2"),
            item("2", key: "b", title: "Came"), item("3", key: "b", .removed, title: "Came"),
            item("4", key: "c", title: "Draft", url: "javascript:alert(1)"), item("5", key: "c", .changed, severity: .critical, title: "Draft 2"),
        ])
        let text = DigestText(d, title: plainTitle)
        XCTAssertEqual(text.heading, "5 events from helpdesk (held for quiet hours)")
        XCTAssertEqual(text.severity, .critical)
        XCTAssertEqual(
            text.plainLines,
            [
                "[warning] Disk full (new) https://example.org/a?x=1&y=2",
                "[info] Came (came and went)",
                "[critical] Draft 2 (new, then changed (2 events))",
            ], "an item that came and went is one line; a javascript: URL is no link")
        XCTAssertEqual(text.plainLines(links: false)[0], "[warning] Disk full (new)")
    }

    func testHTMLLinesEscapeRemoteTextAndLinks() {
        let d = digest([item("1", key: "a", severity: .warning, title: "<b>x</b> & \"y\"", url: "https://example.org/?a=1&b=\"2\"")])
        XCTAssertEqual(
            DigestText(d, title: htmlTitle).htmlLines,
            ["⚠️ <a href=\"https://example.org/?a=1&amp;b=&quot;2&quot;\">&lt;b&gt;x&lt;/b&gt; &amp; &quot;y&quot;</a> (new)"])
        XCTAssertEqual(
            DigestText(d, title: plainTitle).plainLines, ["[warning] <b>x</b> & \"y\" (new) https://example.org/?a=1&b=\"2\""],
            "plain channels show remote text as it is")
    }

    func testTheSinksTitleTemplateNamesEachItem() throws {
        let d = digest([item("1", key: "a", title: "Hello", source: "mail")])
        let text = DigestText(d, title: try MessageTemplate("{{source}}: {{title}}", markup: .plain))
        XCTAssertEqual(text.plainLines, ["[info] mail: Hello (new)"])
    }

    func testSoleLinkOnlyWhenEveryLinkIsTheSame() {
        let a = "https://example.org/a"
        XCTAssertEqual(DigestText.soleLink(digest([item("1", key: "a", url: a), item("2", key: "b"), item("3", key: "c", url: a)])), a)
        XCTAssertNil(DigestText.soleLink(digest([item("1", key: "a", url: a), item("2", key: "b", url: "https://example.org/b")])))
        XCTAssertNil(DigestText.soleLink(digest([item("1", key: "a", url: "javascript:alert(1)")])))
        XCTAssertNil(DigestText.soleLink(digest([item("1", key: "a")])))
    }

    func testFitLeavesOutWholeLinesAndCountsThem() {
        let lines = (1...10).map { "line \($0)" }
        XCTAssertEqual(DigestText.fit(lines) { $0.joined(separator: "\n").count <= 1000 }, lines, "all fit: all shown")
        let fitted = DigestText.fit(lines) { $0.joined(separator: "\n").count <= 40 }
        XCTAssertEqual(fitted, ["line 1", "line 2", "line 3", "line 4", "…and 6 more"])
        XCTAssertEqual(DigestText.fit(lines) { _ in false }, ["line 1", "…and 9 more"], "at least one line; the channel's cutter shortens it")
        XCTAssertEqual(DigestText.kept(lines, 2), ["line 1", "line 2", "…and 8 more"])
        XCTAssertEqual(DigestText.kept(lines, 10), lines)
    }

    // MARK: channels

    func testNtfyDigestIsOneMessageWithTheHighestPriorityAndClickOnlyForOneLink() throws {
        let sink = NtfySink(server: NtfySink.defaultServer, topic: "t", text: try pushText(), client: Failing())
        XCTAssertTrue(sink.rendersDigests)
        let one = "https://example.org/one"
        let body = sink.body(digest([item("1", key: "a", url: one), item("2", key: "b", .new, severity: .warning, title: "<b>&", url: one)]))
        XCTAssertEqual(body["title"]?.stringValue, "2 events from helpdesk (held for quiet hours)")
        XCTAssertEqual(body["message"]?.stringValue, "[info] item a (new) \(one)\n[warning] <b>& (new) \(one)")
        XCTAssertEqual(body["priority"]?.doubleValue, 4)
        XCTAssertEqual(body["click"]?.stringValue, one)
        let two = sink.body(digest([item("1", key: "a", url: one), item("2", key: "b", url: "https://example.org/two")]))
        XCTAssertNil(two["click"], "two links: the tap opens nothing in particular")

        let big = sink.body(many(500, title: { "\"Quoted\" ✓ title \($0) " + String(repeating: "x", count: 30) }))
        let message = try XCTUnwrap(big["message"]?.stringValue)
        XCTAssertLessThanOrEqual(NtfySink.messageLimit.measure(message), 4096)
        XCTAssertTrue(message.hasPrefix("[info] \"Quoted\" ✓ title 1 "))
        XCTAssertTrue(message.range(of: #"\n…and \d+ more$"#, options: .regularExpression) != nil, message.suffix(80).description)
        XCTAssertEqual(big["priority"]?.doubleValue, 5, "item 7 is critical")
        XCTAssertLessThanOrEqual(sink.request(big).body!.count, 8192)
    }

    func testGotifyAndPushoverDigestsAreOneMessage() throws {
        let d = digest([item("1", key: "a", severity: .critical, url: "https://example.org/a"), item("2", key: "b")])
        let gotify = GotifySink(server: URL(string: "https://gotify.example")!, token: Secret("AbCdEfGhIjKlMnO"), text: try pushText(), client: Failing())
        XCTAssertTrue(gotify.rendersDigests)
        let g = gotify.body(d)
        XCTAssertEqual(g["priority"]?.doubleValue, 10)
        XCTAssertEqual(g["message"]?.stringValue, "[critical] item a (new) https://example.org/a\n[info] item b (new)")
        let pushover = PushoverSink(
            userKey: Secret("u" + String(repeating: "1", count: 29)), apiToken: Secret("a" + String(repeating: "2", count: 29)),
            text: try pushText(), client: Failing())
        let p = pushover.body(many(200))
        XCTAssertLessThanOrEqual(try XCTUnwrap(p["message"]?.stringValue).unicodeScalars.count, 1024)
        XCTAssertNil(p["url"])
        XCTAssertEqual(p["title"]?.stringValue, "200 events from helpdesk (grouped)")
    }

    func testTelegramDigestIsEscapedHTMLWithinItsLimit() throws {
        let sink = TelegramSink(
            endpoint: URL(string: "https://api.telegram.org/bot123:SECRETTOKEN/sendMessage")!, chat: .init("-100123"),
            title: htmlTitle, body: MessageTemplate.builtin("{{body}}", markup: .html), client: Failing())
        XCTAssertTrue(sink.rendersDigests)
        let small = sink.message(
            for: digest([
                item("1", key: "a", severity: .warning, title: "<script>&", url: "https://example.org/?a=1&b=2"),
                item("2", key: "b", title: "gone"), item("3", key: "b", .removed, title: "gone"),
            ]))
        XCTAssertEqual(
            small.text,
            """
            ⚠️ <b>3 events from helpdesk (held for quiet hours)</b>
            ⚠️ <a href="https://example.org/?a=1&amp;b=2">&lt;script&gt;&amp;</a> (new)
            ℹ️ gone (came and went)
            """)
        let big = sink.message(for: many(400, title: { "<Item> & number \($0) " + String(repeating: "é", count: 40) }))
        XCTAssertLessThanOrEqual(MarkupCutter.width(big.text, syntax: .telegramHTML), TelegramSink.maxLength)
        XCTAssertTrue(big.text.range(of: #"\n…and \d+ more$"#, options: .regularExpression) != nil, String(big.text.suffix(80)))
        XCTAssertTrue(big.text.contains("&lt;Item&gt; &amp; number 1 "))
        // One enormous title: cut with "…", markup still whole.
        let huge = sink.message(for: digest([item("1", key: "a", title: String(repeating: "<&>", count: 3000), url: "https://example.org/x")]))
        XCTAssertLessThanOrEqual(MarkupCutter.width(huge.text, syntax: .telegramHTML), TelegramSink.maxLength)
        XCTAssertTrue(huge.text.hasSuffix("…</a>"), String(huge.text.suffix(40)))
    }

    func testSlackDigestIsOneMrkdwnMessageWithEscapedLinkedLines() throws {
        let sink = SlackSink(
            url: URL(string: "https://hooks.slack.com/services/T0/B0/SECRETSECRETSECRET")!,
            title: try MessageTemplate("{{title}}", markup: .slack), body: try MessageTemplate("{{body}}", markup: .slack), client: Failing())
        XCTAssertTrue(sink.rendersDigests)
        let p = sink.payload(
            for: digest(
                [
                    item("1", key: "a", severity: .critical, title: "<!channel> & @here", url: "https://example.org/a?b=1&c=2|x>y"),
                    item("2", key: "b"),
                ], reason: .grouped))
        XCTAssertEqual(
            p.text,
            """
            🚨 *2 events from helpdesk (grouped)*
            🚨 <https://example.org/a?b=1&amp;c=2%7Cx%3Ey|&lt;!channel&gt; &amp; @\u{2060}here> (new)
            ℹ️ item b (new)
            """)
        XCTAssertEqual(p.blocks.first?.text.text, p.text)
        let big = sink.payload(for: many(300))
        XCTAssertLessThanOrEqual(MarkupCutter.width(big.text, syntax: .slackMrkdwn), SlackSink.maxLength)
        XCTAssertTrue(big.text.range(of: #"\n…and \d+ more$"#, options: .regularExpression) != nil)
    }

    func testDiscordDigestIsOneEmbedWithMaskedLinks() throws {
        let sink = DiscordSink(
            url: URL(string: "https://discord.com/api/webhooks/1/SECRETSECRETSECRET")!,
            title: try MessageTemplate("{{title}}", markup: .markdown), body: try MessageTemplate("{{body}}", markup: .markdown), client: Failing())
        XCTAssertTrue(sink.rendersDigests)
        let p = sink.payload(
            for: digest([
                item("1", key: "a", severity: .warning, title: "**x** ](evil)", url: "https://example.org/a_(b)"),
                item("2", key: "b", url: "https://example.org/other"),
            ]))
        let embed = try XCTUnwrap(p.embeds.first)
        XCTAssertEqual(p.embeds.count, 1)
        XCTAssertEqual(embed.title, "⚠️ 2 events from helpdesk \\(held for quiet hours\\)")
        XCTAssertEqual(
            embed.description,
            """
            ⚠️ [\\*\\*x\\*\\* \\]\\(evil\\)](https://example.org/a_%28b%29) (new)
            ℹ️ [item b](https://example.org/other) (new)
            """)
        XCTAssertNil(embed.url, "two links: the title links nowhere")
        XCTAssertEqual(embed.color, DiscordSink.color(.warning))
        let big = try XCTUnwrap(sink.payload(for: many(500)).embeds.first?.description)
        XCTAssertLessThanOrEqual(MarkupCutter.width(big, syntax: .markdown), DiscordSink.maxDescription)
    }

    func testMatrixDigestHasPlainAndHTMLBodiesAndAStableTransactionID() throws {
        let sink = MatrixSink(
            homeserver: URL(string: "https://matrix.example.org")!, accessToken: Secret("syt_secret_token_1234"), room: MatrixRoom("!room:example.org")!,
            message: MatrixMessage(kind: .text, title: MarkupPair(plain: plainTitle, html: htmlTitle), body: MarkupPair(plain: plainTitle, html: htmlTitle)),
            sinkName: "mx", client: Failing())
        XCTAssertTrue(sink.rendersDigests)
        let events = [item("1", key: "a", severity: .critical, title: "<b>Down</b> & out", url: "https://example.org/a"), item("2", key: "b")]
        let d = digest(events)
        let c = sink.message.content(for: d)
        XCTAssertEqual(
            c.body, "Critical: 2 events from helpdesk (held for quiet hours)\n[critical] <b>Down</b> & out (new) https://example.org/a\n[info] item b (new)")
        XCTAssertEqual(c.format, "org.matrix.custom.html")
        XCTAssertEqual(
            c.formatted_body,
            """
            <strong><font color="#d00000" data-mx-color="#d00000">Critical:</font> 2 events from helpdesk (held for quiet hours)</strong><ul>
            <li>🚨 <a href="https://example.org/a">&lt;b&gt;Down&lt;/b&gt; &amp; out</a> (new)</li>
            <li>ℹ️ item b (new)</li>
            </ul>
            """)
        XCTAssertEqual(sink.transactionID(for: d), sink.transactionID(for: digest(events.reversed())), "the digest's id decides, so a retry is recognised")
        XCTAssertNotEqual(sink.transactionID(for: d), sink.transactionID(for: digest(events, id: "dg-2")))
        XCTAssertNotEqual(sink.transactionID(for: d), sink.transactionID(for: events[0]))
        XCTAssertTrue(sink.sendRequest(d, roomID: "!room:example.org").url.absoluteString.hasSuffix("/send/m.room.message/" + sink.transactionID(for: d)))
        let big = sink.message.content(for: many(3000, title: { "Item \"\($0)\" <with> markup " + String(repeating: "y", count: 20) }))
        XCTAssertLessThanOrEqual(big.json.count, MatrixMessage.maxContentBytes)
        XCTAssertNotNil(big.formatted_body, "lines are left out before the HTML is")
        XCTAssertTrue(big.body.range(of: #"\n…and \d+ more$"#, options: .regularExpression) != nil)
    }

    func testEmailDigestIsOneMessageWithAStableMessageID() throws {
        let sink = try emailSink("html_template = \"<p>{{title}}</p>\"")
        XCTAssertTrue(sink.rendersDigests)
        let events = [
            item("1", key: "a", severity: .warning, title: "Disk <full> & more", url: "https://example.org/a?x=1&y=2"),
            item("2", key: "b", title: "Blip"), item("3", key: "b", .removed, title: "Blip"),
        ]
        let m = sink.message(for: digest(events, id: "01JDIGEST"))
        XCTAssertEqual(m.subject, "3 events from helpdesk (held for quiet hours)")
        XCTAssertEqual(m.messageID, "digest-01JDIGEST.mail@example.org")
        XCTAssertEqual(sink.message(for: digest(events, id: "01JDIGEST")).messageID, m.messageID, "a retry is the same message")
        XCTAssertEqual(
            m.text,
            """
            3 events from helpdesk (held for quiet hours)

            [warning] Disk <full> & more (new) https://example.org/a?x=1&y=2
            [info] Blip (came and went)

            --\u{20}
            Sent by tidings (digest 01JDIGEST).

            """)
        let html = try XCTUnwrap(m.html)
        XCTAssertTrue(html.contains("<li>⚠️ <a href=\"https://example.org/a?x=1&amp;y=2\">Disk &lt;full&gt; &amp; more</a> (new)</li>"), html)
        XCTAssertTrue(html.contains("<li>ℹ️ Blip (came and went)</li>"), html)
        let headers = Dictionary(m.extraHeaders, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(headers["X-Tidings-Digest"], "01JDIGEST")
        XCTAssertEqual(headers["X-Priority"], "2 (High)")
        XCTAssertNil(try emailSink("").message(for: digest(events)).html, "no html_template: text only")
    }

    func testDesktopDigestIsOneSummaryNotification() {
        var style = DesktopStyle()
        style.bodyMarkup = true
        let d = digest((1...8).map { item("e\($0)", key: "k\($0)", severity: $0 == 3 ? .critical : .info, title: "T<\($0)>", url: "https://example.org/same") })
        let n = style.notification(for: d)
        XCTAssertEqual(n.summary, "8 events from helpdesk (held for quiet hours)")
        XCTAssertEqual(
            n.body,
            "• [info] T&lt;1&gt; (new)\n• [info] T&lt;2&gt; (new)\n• [critical] T&lt;3&gt; (new)\n• [info] T&lt;4&gt; (new)\n• [info] T&lt;5&gt; (new)\n…and 3 more"
        )
        XCTAssertEqual(n.urgency, .critical)
        XCTAssertEqual(n.openURL, "https://example.org/same")
        XCTAssertEqual(n.category, "x-tidings.message")
    }

    // MARK: helpers

    private func pushText() throws -> PushText {
        PushText(title: try MessageTemplate("{{title}}", markup: .plain), body: try MessageTemplate("{{body}}", markup: .plain))
    }

    private func emailSink(_ options: String) throws -> EmailSink {
        let text =
            "[sinks.mail]\ntype = \"email\"\nfrom = \"Tidings <tidings@example.org>\"\nsmtp_url = \"smtps://mail.example.org\"\nto = \"ops@example.org\"\n"
            + options
        return try XCTUnwrap(loadConfig(text).sink(named: "mail")?.instance as? EmailSink)
    }
}
