import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "discord"`: one embed per event to a Discord webhook.
///
/// Options: `url`* (the webhook URL is the credential: given as `url`, `url_file`, `url_env` or
/// `url_credential`, never shown), `title_template`, `body_template` (Mustache, escaped for
/// Discord's Markdown).
///
/// The embed: title = the severity's mark and the title (≤ 256), `url` = the event URL (the
/// title becomes its link), description = the body (≤ 4096), colour by severity, timestamp =
/// `observed_at`. `allowed_mentions` is empty, so no text can ping `@everyone`, a role or a user.
/// Sent with `?wait=true`: Discord then answers only once the message is saved (without it a
/// message that is not saved returns no error). A digest (quiet hours, `group_wait`) is one
/// embed, a line per item.
///
/// Answers: 2xx delivered; 429 retried after the longest of `retry_after` (body),
/// `Retry-After` and `X-RateLimit-Reset-After`; 5xx retried; 401, 403 and 404 (`Unknown
/// Webhook`, code 10015) stop the sink until reload with the reason; another 4xx (a refused
/// message, `Invalid Form Body`) is a dead letter.
package struct DiscordSink: Sink {
    /// The webhook payload (the one wire shape this sink sends).
    package struct Payload: Encodable, Sendable {
        package struct Embed: Encodable, Sendable {
            package var title: String
            package var description: String?
            package var url: String?
            package var color: Int
            package var timestamp: String
        }
        package struct AllowedMentions: Encodable, Sendable {
            /// Empty: no mention in the text notifies anyone.
            var parse: [String] = []
        }
        package var embeds: [Embed]
        package var allowedMentions = AllowedMentions()
    }

    /// Discord's 429 body: `{"message", "retry_after": seconds (float), "global"}`; other errors
    /// `{"message", "code"}`.
    package struct Reply: Decodable, Sendable {
        var message: String?
        var code: Int?
        var retryAfter: Double?
        var global: Bool?
    }

    /// Discord's documented embed limits.
    package static let maxTitle = 256
    package static let maxDescription = 4096

    /// The webhook URL with `wait=true`: the secret.
    package let url: URL
    let title: MessageTemplate
    let body: MessageTemplate
    package let delivery: HTTPDelivery

    package init(url: URL, title: MessageTemplate, body: MessageTemplate, client: any HTTPClient) {
        self.url = Self.waiting(url)
        self.title = title
        self.body = body
        delivery = HTTPDelivery(endpoint: ChatChannel.endpoint("discord webhook", url), client: client)
    }

    package static let factory = SinkFactory(type: "discord", summary: "Discord webhook messages (one embed per event)") { o, setup in
        DiscordSink(
            url: try ChatChannel.webhookURL(o),
            title: try MessageTemplate.option(o, "title_template", default: "{{title}}", markup: .markdown),
            body: try MessageTemplate.option(o, "body_template", default: "{{body}}", markup: .markdown),
            client: setup.http)
    }

    /// `url` with `wait=true` (other query items, such as `thread_id`, kept).
    static func waiting(_ url: URL) -> URL {
        guard var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        c.queryItems = (c.queryItems ?? []).filter { $0.name != "wait" } + [URLQueryItem(name: "wait", value: "true")]
        return c.url ?? url
    }

    package func deliver(_ events: [Event]) async throws {
        for e in events { try await delivery.send(request(for: e), judge: judge) }
    }

    /// The request for one event (no network I/O; tests inspect it).
    package func request(for event: Event) -> HTTPRequest {
        ChatChannel.post(url, json: ChatChannel.encode(payload(for: event)))
    }

    package func payload(for event: Event) -> Payload {
        let title = MarkupCutter.cut("\(ChatChannel.emoji(event.severity)) \(self.title.render(event))", limit: Self.maxTitle, syntax: .markdown)
        let body = MarkupCutter.cut(self.body.render(event), limit: Self.maxDescription, syntax: .markdown)
        let embed = Payload.Embed(
            title: title, description: body.isEmpty ? nil : body, url: ChatChannel.link(event)?.absoluteString,
            color: Self.color(event.severity), timestamp: Timestamp.format(event.observedAt))
        return Payload(embeds: [embed])
    }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws {
        try await delivery.send(ChatChannel.post(url, json: ChatChannel.encode(payload(for: digest))), judge: judge)
    }

    /// A digest as one embed: the highest severity's mark and the heading as its title (linked
    /// only when the digest has one link), a line per item in the description (mark, title from
    /// `title_template` as a masked link, what happened), as many as fit, the rest counted.
    package func payload(for digest: Digest) -> Payload {
        let text = DigestText(digest, title: title)
        let lines = text.markedLines(.markdown) { url, title in "[\(title)](\(Self.linkTarget(url)))" }
        let embed = Payload.Embed(
            title: MarkupCutter.cut("\(ChatChannel.emoji(text.severity)) \(Markup.markdown.escape(text.heading))", limit: Self.maxTitle, syntax: .markdown),
            description: DigestText.message(head: nil, lines: lines, limit: Self.maxDescription, syntax: .markdown),
            url: DigestText.soleLink(digest), color: Self.color(text.severity),
            timestamp: Timestamp.format(digest.events.map(\.observedAt).max() ?? Date()))
        return Payload(embeds: [embed])
    }

    /// A URL inside a masked link's `(…)`: the characters that would end it or start another
    /// (`(`, `)`, `<`, `>`, blanks) percent-encoded.
    package static func linkTarget(_ url: String) -> String {
        var out = ""
        for c in url.unicodeScalars {
            let special = "()<>\"".unicodeScalars.contains(c) || c.properties.isWhitespace
            if special { out += "%" + hexCode(c.value) } else { out.unicodeScalars.append(c) }
        }
        return out
    }

    /// The embed's colour bar: blue, amber, red.
    package static func color(_ severity: Severity) -> Int {
        switch severity {
        case .info: return 0x3498DB
        case .warning: return 0xF1C40F
        case .critical: return 0xE74C3C
        }
    }

    /// Discord's own answers: its rate-limit fields, and 404 (`Unknown Webhook`) as a dead sink.
    package func judge(_ r: HTTPResponse) -> HTTPDelivery.Outcome? {
        switch r.status {
        case 429:
            let body = ChatChannel.decode(Reply.self, r.body)?.retryAfter
            let resetAfter = r.header("x-ratelimit-reset-after").flatMap { Double($0.trimmed(newlines: false)) }
            let waits = [body, resetAfter, r.retryAfter].compactMap { $0 }.filter(\.isFinite)
            let wait = waits.max().map { min(max(0, $0), HTTPResponse.maxRetryAfter) }
            return ChatChannel.failure(delivery.endpoint, r, .retryable, "rate limited", retryAfter: wait)
        case 401, 403:
            return ChatChannel.failure(
                delivery.endpoint, r, .gone, "the webhook token was refused: the webhook was reset or the url is wrong; fix it, then reload")
        case 404:
            return ChatChannel.failure(delivery.endpoint, r, .gone, "no such webhook: it was deleted or the url is wrong; fix it, then reload")
        default:
            return nil
        }
    }
}
