import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "slack"`: one message per event to a Slack incoming webhook (Mattermost and
/// Rocket.Chat accept the same payload).
///
/// Options: `url`* (the webhook URL is the credential: given as `url`, `url_file`, `url_env` or
/// `url_credential`, never shown), `title_template`, `body_template` (Mustache, escaped for
/// `mrkdwn`).
///
/// The message is `mrkdwn`: the severity's mark, the title in bold as a link to the event URL
/// (`<url|title>`), the body below. It goes as `text` (what notifications, Mattermost and
/// Rocket.Chat show) and as one `section` block (what Slack shows), cut to the block's 3000
/// characters without breaking a link or an entity. A digest (quiet hours, `group_wait`) is
/// one such message, a line per item.
///
/// Answers (Slack's are plain-text codes): 2xx delivered; 429 retried after `Retry-After`; 5xx
/// retried; 403 (`action_prohibited`, `invalid_token`, …), 404 (`no_service`,
/// `channel_not_found`, …), 410 (`channel_is_archived`) and the 400s that name a wrong webhook
/// stop the sink until reload with the reason; another 400 (`invalid_payload`) is a dead letter.
package struct SlackSink: Sink {
    /// The webhook payload (the one wire shape this sink sends).
    package struct Payload: Encodable, Sendable {
        package struct Block: Encodable, Sendable {
            package struct Text: Encodable, Sendable {
                var type = "mrkdwn"
                var text: String
            }
            var type = "section"
            var text: Text
        }
        package var text: String
        package var blocks: [Block]

        init(mrkdwn: String) {
            text = mrkdwn
            blocks = [Block(text: Block.Text(text: mrkdwn))]
        }
    }

    /// The longest `text` of a section block Slack accepts.
    package static let maxLength = 3000

    /// The webhook URL: the secret.
    package let url: URL
    let title: MessageTemplate
    let body: MessageTemplate
    package let delivery: HTTPDelivery

    package init(url: URL, title: MessageTemplate, body: MessageTemplate, client: any HTTPClient) {
        self.url = url
        self.title = title
        self.body = body
        delivery = HTTPDelivery(endpoint: ChatChannel.endpoint("slack webhook", url), client: client)
    }

    package static let factory = SinkFactory(type: "slack", summary: "Slack (or Mattermost, Rocket.Chat) incoming-webhook messages") { o, setup in
        SlackSink(
            url: try ChatChannel.webhookURL(o),
            title: try MessageTemplate.option(o, "title_template", default: "{{title}}", markup: .slack),
            body: try MessageTemplate.option(o, "body_template", default: "{{body}}", markup: .slack),
            client: setup.http)
    }

    package func deliver(_ events: [Event]) async throws {
        for e in events { try await delivery.send(request(for: e), judge: judge) }
    }

    /// The request for one event (no network I/O; tests inspect it).
    package func request(for event: Event) -> HTTPRequest {
        ChatChannel.post(url, json: ChatChannel.encode(payload(for: event)))
    }

    package func payload(for event: Event) -> Payload {
        Payload(mrkdwn: Self.text(title: title.render(event), body: body.render(event), severity: event.severity, link: ChatChannel.link(event)))
    }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws {
        try await delivery.send(ChatChannel.post(url, json: ChatChannel.encode(payload(for: digest))), judge: judge)
    }

    /// A digest as one message: the highest severity's mark and the heading in bold, then a line
    /// per item (mark, title from `title_template` linked as `<url|title>`, what happened), as
    /// many as fit in 3000 characters, the rest counted ("…and 12 more").
    package func payload(for digest: Digest) -> Payload {
        let text = DigestText(digest, title: title)
        let lines = text.markedLines(.slack) { url, title in URL(string: url).map { "<\(Self.linkTarget($0))|\(title)>" } ?? title }
        let head = "\(ChatChannel.emoji(text.severity)) *\(Markup.slack.escape(text.heading))*"
        return Payload(mrkdwn: DigestText.message(head: head, lines: lines, limit: Self.maxLength, syntax: .slackMrkdwn))
    }

    /// The message from the rendered (escaped) title and body: mark, bold linked title, body; cut.
    package static func text(title: String, body: String, severity: Severity, link: URL?) -> String {
        let heading = link.map { "<\(linkTarget($0))|\(title)>" } ?? title
        var text = "\(ChatChannel.emoji(severity)) *\(heading)*"
        if !body.isEmpty { text += "\n" + body }
        return MarkupCutter.cut(text, limit: maxLength, syntax: .slackMrkdwn)
    }

    /// A URL inside `<…|…>`: `&` as an entity (as Slack escapes all text), and `<`, `>`, `|` and
    /// blanks percent-encoded, so the URL can neither end the link nor become its label.
    package static func linkTarget(_ url: URL) -> String {
        var out = ""
        for c in url.absoluteString.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<", ">", "|", " ", "\"": out += "%" + hexCode(c.value)
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// Slack's own answers: the error codes that mean the webhook itself is wrong or revoked.
    package func judge(_ r: HTTPResponse) -> HTTPDelivery.Outcome? {
        guard [400, 403, 404, 410].contains(r.status) else { return nil }
        let code = String(decoding: r.body.prefix(200), as: UTF8.self).trimmed()
        if let meaning = Self.webhookErrors[code] {
            return ChatChannel.failure(delivery.endpoint, r, .gone, meaning + "; fix the webhook, then reload")
        }
        if r.status == 404 {
            return ChatChannel.failure(delivery.endpoint, r, .gone, "no such webhook: it was removed or the url is wrong; fix it, then reload")
        }
        return nil
    }

    /// Slack's webhook error codes that no retry or other message can fix.
    static let webhookErrors = [
        "action_prohibited": "an admin has restricted posting through this webhook",
        "posting_to_general_channel_denied": "only admins may post to this channel",
        "invalid_token": "the webhook's token is no longer valid",
        "no_service": "the webhook is disabled, removed or invalid",
        "no_service_id": "the webhook URL is invalid",
        "no_team": "the Slack workspace is missing or deleted",
        "team_disabled": "the Slack workspace is disabled",
        "channel_not_found": "the webhook's channel does not exist",
        "channel_is_archived": "the webhook's channel is archived",
        "user_not_found": "the webhook's user does not exist",
    ]
}
