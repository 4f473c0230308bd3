import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "telegram"`: one Telegram message per event, sent by a bot (Bot API `sendMessage`).
///
/// Options: `bot_token`* (from @BotFather), `chat_id` (a number, or `@channelname`), `api_url`
/// (default `https://api.telegram.org`, or a self-hosted Bot API server), `title_template`,
/// `body_template` (Mustache, HTML-escaped).
///
/// The message is `parse_mode=HTML`: the severity's mark, the title in bold and linked to the
/// event URL, the body below; link previews off. It is cut to Telegram's 4096 characters (counted
/// after entity parsing) without breaking a tag or entity. The bot token is part of the URL path,
/// so messages name the endpoint `telegram sendMessage at HOST` and the ``Redactor`` knows it.
/// A digest (quiet hours, `group_wait`) is one message, a line per item.
///
/// Answers: 2xx delivered; 429 retried after `parameters.retry_after`; 401, 403 (bot blocked or
/// removed), 404 (wrong token or api_url), 400 "chat not found" and the like, and a group that
/// became a supergroup (`parameters.migrate_to_chat_id`) stop the sink until reload with the
/// reason; another 400 is a dead letter; 5xx and network errors are retried.
package struct TelegramSink: Sink {
    /// Who receives the messages: a numeric chat id or a public `@username`.
    package enum ChatID: Encodable, Equatable, Sendable {
        case number(Int64)
        case username(String)

        package init(_ text: String) {
            self = Int64(text).map(ChatID.number) ?? .username(text)
        }

        package func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            switch self {
            case .number(let n): try c.encode(n)
            case .username(let s): try c.encode(s)
            }
        }
    }

    /// The `sendMessage` request body (the one wire shape this sink sends).
    package struct SendMessage: Encodable, Sendable {
        package struct LinkPreviewOptions: Encodable, Sendable { var isDisabled = true }
        package var chatId: ChatID
        package var text: String
        package var parseMode = "HTML"
        package var linkPreviewOptions = LinkPreviewOptions()
    }

    /// Telegram's answer: `{"ok", "result"}` or `{"ok": false, "error_code", "description",
    /// "parameters": {"retry_after", "migrate_to_chat_id"}}`.
    package struct Reply: Decodable, Sendable {
        package struct Parameters: Decodable, Sendable {
            var retryAfter: Double?
            var migrateToChatId: Int64?
        }
        var ok: Bool?
        var errorCode: Int?
        var description: String?
        var parameters: Parameters?
    }

    /// Telegram's documented maximum, in characters after entity parsing.
    package static let maxLength = 4096
    package static let defaultAPI = "https://api.telegram.org"

    /// `{api_url}/bot{token}/sendMessage`: holds the token, never shown.
    package let endpoint: URL
    package let chat: ChatID
    let title: MessageTemplate
    let body: MessageTemplate
    package let delivery: HTTPDelivery

    package init(endpoint: URL, chat: ChatID, title: MessageTemplate, body: MessageTemplate, client: any HTTPClient) {
        self.endpoint = endpoint
        self.chat = chat
        self.title = title
        self.body = body
        delivery = HTTPDelivery(endpoint: ChatChannel.endpoint("telegram sendMessage", endpoint), client: client)
    }

    package static let factory = SinkFactory(type: "telegram", summary: "Telegram messages from a bot (Bot API sendMessage)") { o, setup in
        let token = try o.secret("bot_token", required: true)!.value
        if !token.isEmpty, !token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == ":" || $0 == "_" || $0 == "-") }) {
            throw o.error(
                o.has("bot_token") ? "bot_token" : nil,
                "\(o.what): 'bot_token' is not a Telegram bot token (digits, ':', then letters, digits, '_' and '-'; value not shown)")
        }
        let chat: String
        if case .int(_)? = o.table["chat_id"]?.value {
            chat = String(try o.int("chat_id")!)
        } else {
            chat = try o.requiredString("chat_id")
        }
        let given = try o.configURL("api_url") ?? ConfigURL(defaultAPI)
        var api = given.raw
        while api.hasSuffix("/") { api.removeLast() }
        let base = try ChatChannel.httpURL(o, "api_url", api, shown: given.password == nil)
        guard base.query == nil, base.fragment == nil, let endpoint = URL(string: api + "/bot" + token + "/sendMessage") else {
            throw o.error("api_url", "\(o.what): 'api_url' must be the Bot API server's base URL (like \(defaultAPI)), not \"\(given.shown)\"")
        }
        return TelegramSink(
            endpoint: endpoint, chat: ChatID(chat),
            title: try MessageTemplate.option(o, "title_template", default: "{{title}}", markup: .html),
            body: try MessageTemplate.option(o, "body_template", default: "{{body}}", markup: .html),
            client: setup.http)
    }

    package func deliver(_ events: [Event]) async throws {
        for e in events { try await delivery.send(request(for: e), judge: judge) }
    }

    /// The request for one event (no network I/O; tests inspect it).
    package func request(for event: Event) -> HTTPRequest { request(message(for: event)) }

    package func request(_ message: SendMessage) -> HTTPRequest {
        ChatChannel.post(endpoint, json: ChatChannel.encode(message))
    }

    package func message(for event: Event) -> SendMessage {
        SendMessage(
            chatId: chat, text: Self.text(title: title.render(event), body: body.render(event), severity: event.severity, link: ChatChannel.link(event)))
    }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws {
        try await delivery.send(request(message(for: digest)), judge: judge)
    }

    /// A digest as one message: the highest severity's mark and the heading in bold, then a line
    /// per item (its mark, its title from `title_template` linked to it, what happened), as many
    /// as fit in Telegram's 4096 characters, the rest counted ("…and 12 more").
    package func message(for digest: Digest) -> SendMessage {
        let text = DigestText(digest, title: title)
        let head = "\(ChatChannel.emoji(text.severity)) <b>\(Markup.html.escape(text.heading))</b>"
        return SendMessage(chatId: chat, text: DigestText.message(head: head, lines: text.htmlLines, limit: Self.maxLength, syntax: .telegramHTML))
    }

    /// The message text from the rendered (escaped) title and body: the severity's mark, the title
    /// in bold (a link to the event when there is one), the body on the next lines; cut to fit.
    package static func text(title: String, body: String, severity: Severity, link: URL?) -> String {
        let heading = link.map { "<a href=\"\(Markup.html.escape($0.absoluteString))\">\(title)</a>" } ?? title
        var text = "\(ChatChannel.emoji(severity)) <b>\(heading)</b>"
        if !body.isEmpty { text += "\n" + body }
        return MarkupCutter.cut(text, limit: maxLength, syntax: .telegramHTML)
    }

    /// Telegram's own answers: its `retry_after`, and the errors that mean the configuration is
    /// wrong (nothing more will be delivered until it is fixed). The rest is ``HTTPDelivery``'s.
    package func judge(_ r: HTTPResponse) -> HTTPDelivery.Outcome? {
        guard !(200..<300).contains(r.status) else { return nil }
        let reply = ChatChannel.decode(Reply.self, r.body)
        let description = (reply?.description ?? "").lowercased()
        let endpoint = delivery.endpoint
        if let chat = reply?.parameters?.migrateToChatId {
            return ChatChannel.failure(endpoint, r, .gone, "the group became a supergroup: set chat_id = \(chat), then reload")
        }
        switch r.status {
        case 429:
            let wait = reply?.parameters?.retryAfter ?? r.retryAfter
            return ChatChannel.failure(endpoint, r, .retryable, "rate limited", retryAfter: wait.map { min(max(0, $0), HTTPResponse.maxRetryAfter) })
        case 401:
            return ChatChannel.failure(endpoint, r, .gone, "the bot token was refused: check bot_token, then reload")
        case 403:
            return ChatChannel.failure(
                endpoint, r, .gone, "the bot may not write to this chat (blocked, removed, or no rights): fix it in Telegram or chat_id, then reload")
        case 404:
            return ChatChannel.failure(endpoint, r, .gone, "no such bot: check bot_token and api_url, then reload")
        case 400 where Self.configErrors.contains(where: { description.contains($0) }):
            return ChatChannel.failure(
                endpoint, r, .gone, "chat_id does not name a chat this bot can write to: check chat_id and the bot's membership, then reload")
        default:
            return nil
        }
    }

    /// Words of a 400 `description` that mean chat_id or the bot's rights are wrong, not the message.
    static let configErrors = [
        "chat not found", "chat_id is empty", "peer_id_invalid", "not enough rights", "need administrator rights", "bot is not a member",
    ]
}
