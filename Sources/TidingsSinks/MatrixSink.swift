import FoundationEssentials
import Synchronization
import TidingsCrypto
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "matrix"`: posts each event as a message into a Matrix room through the
/// client-server API (`PUT /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}`).
///
/// Options: `homeserver` (required, http or https), `access_token` / `_file` / `_env` /
/// `_credential` (required; sent as `Authorization: Bearer`, never in a URL), `room` (required:
/// a room id `!…` or an alias `#name:server`, resolved once through the room directory),
/// `msgtype` (`m.text`, the default, or `m.notice`), `title_template`, `body_template`
/// (Mustache, ``MessageTemplate``), `timeout` (default "15s").
///
/// The transaction id is derived from the sink's name, the room and the event id, so a retried
/// send (its answer lost) is recognised by the homeserver and not posted twice. A digest (quiet
/// hours, `group_wait`) is one message, a list with a line per item; its transaction id comes
/// from the digest's id.
///
/// Outcome, for the outbox: as ``HTTPDelivery`` says, read through the Matrix error body:
/// `M_LIMIT_EXCEEDED` (429) is retried after `Retry-After` or `retry_after_ms`; a refused token
/// (401) and `M_FORBIDDEN` (403, e.g. the account is not in the room) disable the sink until
/// reload with the reason; an alias that does not exist does too.
package struct MatrixSink: Sink {
    /// The homeserver's base URL (no trailing slash).
    package var homeserver: URL
    var accessToken: Secret
    var room: MatrixRoom
    var message: MatrixMessage
    /// Part of each transaction id: two sinks posting the same event to one room both post.
    var sinkName: String
    var timeout: TimeInterval
    var client: any HTTPClient
    /// The room id an alias resolved to, kept for the sink's life (until reload).
    let resolved = RoomIDCache()

    init(
        homeserver: URL, accessToken: Secret, room: MatrixRoom, message: MatrixMessage, sinkName: String,
        timeout: TimeInterval = 15, client: any HTTPClient
    ) {
        self.homeserver = homeserver
        self.accessToken = accessToken
        self.room = room
        self.message = message
        self.sinkName = sinkName
        self.timeout = timeout
        self.client = client
    }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "matrix", summary: "post events into a Matrix room") { o, setup in
        let given = try o.requiredConfigURL("homeserver")
        let raw = given.raw
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host != nil, url.query == nil, url.user == nil
        else {
            throw o.error(
                "homeserver",
                "\(o.what): 'homeserver' must be an http:// or https:// URL without user or query, like \"https://matrix.example.org\", not \"\(given.shown)\"")
        }
        let homeserver = raw.hasSuffix("/") ? URL(string: String(raw.dropLast()))! : url
        let token = try o.secret("access_token", required: true)!
        let roomText = try o.requiredString("room")
        guard let room = MatrixRoom(roomText) else {
            throw o.error("room", "\(o.what): 'room' must be a room id (\"!abc123:example.org\") or an alias (\"#alerts:example.org\"), not \"\(roomText)\"")
        }
        let typeText = try o.string("msgtype") ?? MatrixMessage.Kind.text.rawValue
        guard let kind = MatrixMessage.Kind(rawValue: typeText) else {
            throw o.error("msgtype", "\(o.what): 'msgtype' must be \"m.text\" or \"m.notice\", not \"\(typeText)\"")
        }
        let message = MatrixMessage(
            kind: kind,
            title: try MarkupPair.option(o, "title_template", default: "{{title}}"),
            body: try MarkupPair.option(o, "body_template", default: "{{body}}"))
        return MatrixSink(
            homeserver: homeserver, accessToken: token, room: room, message: message, sinkName: setup.name,
            timeout: try o.duration("timeout", minimum: 1) ?? 15, client: setup.http)
    }

    /// Sends each event in order; the first failure throws, classified for the outbox.
    package func deliver(_ events: [Event]) async throws {
        for e in events {
            let roomID = try await resolveRoom()
            try await delivery.send(sendRequest(e, roomID: roomID), judge: judge(while: .sending))
        }
    }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: TidingsPluginAPI.Digest) async throws {
        let roomID = try await resolveRoom()
        try await delivery.send(sendRequest(digest, roomID: roomID), judge: judge(while: .sending))
    }

    // MARK: requests (pure: tests inspect them)

    /// The transaction id for `event`: the same on every retry of that event to this room by
    /// this sink, different for anything else. Hex, so it needs no escaping.
    package func transactionID(for event: Event) -> String { transactionID(event.id) }

    /// The transaction id for a digest: the same on every retry of it (its id is stable for
    /// the same held rows), never one of an event's.
    package func transactionID(for digest: TidingsPluginAPI.Digest) -> String { transactionID("digest \(digest.id)") }

    private func transactionID(_ what: String) -> String {
        let digest = SHA256.hash("\(sinkName)\n\(room.text)\n\(what)".utf8)
        return "tidings-" + hexString(digest.prefix(16))
    }

    /// The `PUT …/send/m.room.message/{txnId}` for one event.
    package func sendRequest(_ event: Event, roomID: String) -> HTTPRequest {
        sendRequest(message.content(for: event), transaction: transactionID(for: event), roomID: roomID)
    }

    /// The `PUT …/send/m.room.message/{txnId}` for a digest.
    package func sendRequest(_ digest: TidingsPluginAPI.Digest, roomID: String) -> HTTPRequest {
        sendRequest(message.content(for: digest), transaction: transactionID(for: digest), roomID: roomID)
    }

    private func sendRequest(_ content: MatrixWire.Content, transaction: String, roomID: String) -> HTTPRequest {
        let path = "rooms/\(Self.pathSegment(roomID))/send/m.room.message/\(Self.pathSegment(transaction))"
        return request(method: "PUT", path: path, body: content.json)
    }

    /// The `GET …/directory/room/{alias}` that resolves an alias.
    package func aliasRequest(_ alias: String) -> HTTPRequest {
        request(method: "GET", path: "directory/room/\(Self.pathSegment(alias))", body: nil)
    }

    private func request(method: String, path: String, body: Data?) -> HTTPRequest {
        var headers = [("Authorization", "Bearer \(accessToken.value)")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        return HTTPRequest(
            method: method, url: URL(string: homeserver.absoluteString + "/_matrix/client/v3/" + path)!,
            headers: headers, body: body, timeout: timeout, maxBody: 64 << 10, redirects: .never)
    }

    /// Everything but RFC 3986's unreserved characters percent-encoded: `!`, `#`, `:` and `/`
    /// of room ids and aliases included, as the Matrix spec asks for path parameters.
    package static func pathSegment(_ s: String) -> String {
        s.percentEncoded(keeping: isUnreservedURLByte)
    }

    // MARK: answers

    /// What the sink was doing when an answer came, which decides what a 404 means.
    package enum Step: Sendable {
        case resolvingAlias(String)
        case sending
    }

    var delivery: HTTPDelivery {
        HTTPDelivery(endpoint: "matrix \(HTTPDelivery.display(homeserver)) room \(room.text)", client: client)
    }

    /// The room id to send to: the configured id, or the alias resolved (once).
    func resolveRoom() async throws -> String {
        guard case .alias(let alias) = room else { return room.text }
        if let id = resolved.value { return id }
        let response = try await delivery.send(aliasRequest(alias), judge: judge(while: .resolvingAlias(alias)))
        guard let answer = try? JSONDecoder().decode(MatrixWire.AliasAnswer.self, from: response.body),
            answer.room_id.hasPrefix("!")
        else {
            throw DeliveryError(.retryable, "\(delivery.endpoint): resolving \(alias) gave no room id" + HTTPDelivery.excerpt(response.body))
        }
        resolved.value = answer.room_id
        return answer.room_id
    }

    /// Reads the Matrix error body (`errcode`, `error`, `retry_after_ms`); nil leaves the
    /// answer to ``HTTPDelivery``'s standard mapping.
    package func judge(while step: Step) -> @Sendable (HTTPResponse) -> HTTPDelivery.Outcome? {
        let endpoint = delivery.endpoint
        let roomText = room.text
        return { r in
            guard !(200..<300).contains(r.status) else { return nil }
            let error = try? JSONDecoder().decode(MatrixWire.ErrorAnswer.self, from: r.body)
            let what = "\(endpoint): HTTP \(r.status)" + (error.map { ": " + $0.summary } ?? HTTPDelivery.excerpt(r.body))
            switch (r.status, step) {
            case (429, _):
                let wait = r.retryAfter ?? error?.retry_after_ms.map { min(max(0, Double($0) / 1000), HTTPResponse.maxRetryAfter) }
                return .failed(DeliveryError(.retryable, what + " (rate limited)", retryAfter: wait))
            case (401, _):
                return .failed(DeliveryError(.gone, what + " (the access token was refused: log in again for a new one, then reload)"))
            case (403, .sending):
                return .failed(DeliveryError(.gone, what + " (not allowed to post in \(roomText): invite and join the sink's account, then reload)"))
            case (403, .resolvingAlias):
                return .failed(DeliveryError(.gone, what + " (the homeserver refused to resolve \(roomText): check the sink's access token, then reload)"))
            case (404, .resolvingAlias(let alias)):
                return .failed(DeliveryError(.gone, what + " (no room has the alias \(alias): fix 'room', then reload)"))
            case (404, .sending):
                return .failed(DeliveryError(.gone, what + " (the homeserver does not know this room or API: check 'homeserver' and 'room', then reload)"))
            default:
                return nil
            }
        }
    }
}

/// Where a Matrix sink posts: a room id, or an alias resolved to one.
enum MatrixRoom: Sendable, Equatable {
    /// `!opaque:server` (or `!opaque` from room version 12 on).
    case id(String)
    /// `#name:server`.
    case alias(String)

    init?(_ text: String) {
        guard text.count > 1, !text.contains(where: { $0.isWhitespace || $0.isNewline }) else { return nil }
        if text.hasPrefix("!") {
            self = .id(text)
        } else if text.hasPrefix("#"), let colon = text.firstIndex(of: ":"), colon > text.index(after: text.startIndex),
            colon < text.index(before: text.endIndex)
        {
            self = .alias(text)
        } else {
            return nil
        }
    }

    var text: String {
        switch self {
        case .id(let s), .alias(let s): return s
        }
    }
}

/// The room id a ``MatrixSink`` resolved its alias to.
final class RoomIDCache: Sendable {
    private let state = Mutex<String?>(nil)
    var value: String? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}

/// A template compiled twice: for Matrix's plain `body` and for its HTML `formatted_body`.
struct MarkupPair: Sendable {
    var plain: MessageTemplate
    var html: MessageTemplate

    /// The text of both, for `event`.
    struct Rendered {
        var plain: String
        var html: String
    }

    func render(_ event: Event) -> Rendered {
        Rendered(plain: plain.render(event), html: html.render(event))
    }

    static func option(_ o: OptionReader, _ key: String, default fallback: String) throws -> MarkupPair {
        MarkupPair(
            plain: try MessageTemplate.option(o, key, default: fallback, markup: .plain),
            html: try MessageTemplate.option(o, key, default: fallback, markup: .html))
    }
}

/// The wire shapes of the Matrix client-server API this sink uses, each defined once.
enum MatrixWire {
    /// An `m.room.message` event's content.
    struct Content: Encodable, Equatable {
        var msgtype: String
        var body: String
        var format: String?
        var formatted_body: String?
        /// Always empty (intentional mentions, Matrix v1.7): the message mentions nobody. Without
        /// it, clients and servers fall back to matching the text, and remote text that says
        /// `@room` or a member's display name would highlight the whole room or that member.
        var mentions = Mentions()

        /// `m.mentions`: no `user_ids`, no `room`.
        struct Mentions: Encodable, Equatable {}

        enum CodingKeys: String, CodingKey {
            case msgtype, body, format, formatted_body
            case mentions = "m.mentions"
        }

        var json: Data {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try? encoder.encode(self)) ?? Data("{}".utf8)
        }
    }

    /// The answer to `GET /directory/room/{alias}`.
    struct AliasAnswer: Decodable {
        var room_id: String
    }

    /// A Matrix error answer.
    struct ErrorAnswer: Decodable {
        var errcode: String?
        var error: String?
        var retry_after_ms: Int?

        /// `M_FORBIDDEN: You are not in this room`, cut and scrubbed for a message.
        var summary: String {
            let text = [errcode, error].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": ")
            return Redactor.shared.excerpt(Data(text.utf8))
        }
    }
}

/// How an event reads in a Matrix room: `body` in plain text, `formatted_body` in the HTML
/// subset Matrix clients render, severity as a coloured label, the event URL as a link.
struct MatrixMessage: Sendable {
    enum Kind: String, Sendable {
        /// An ordinary message: Matrix's default push rules notify for it.
        case text = "m.text"
        /// A notice: shown, but the default push rule `.m.rule.suppress_notices` keeps it quiet,
        /// and bots never answer one.
        case notice = "m.notice"
    }

    var kind: Kind
    var title: MarkupPair
    var body: MarkupPair

    /// Matrix events are at most 65536 bytes in their federation form (signatures, hashes and
    /// room fields included): the content is kept below this.
    static let maxContentBytes = 60_000

    func content(for event: Event) -> MatrixWire.Content {
        let title = self.title.render(event)
        let body = self.body.render(event)
        let label = SeverityLabel(event.severity)
        let link = DesktopStyle.openable(event.url)

        var plain = (label.map { "\($0.text): " } ?? "") + title.plain
        if !body.plain.isEmpty { plain += "\n" + body.plain }
        if let link { plain += "\n" + link }

        var html = "<strong>" + (label?.html ?? "") + title.html + "</strong>"
        if !body.html.isEmpty { html += "<br>" + body.html.replacingScalars("\n", with: "<br>\n") }
        if let link {
            let href = Markup.html.escape(link)
            html += "<br><a href=\"\(href)\">\(href)</a>"
        }
        let content = MatrixWire.Content(msgtype: kind.rawValue, body: plain, format: "org.matrix.custom.html", formatted_body: html)
        return Self.fitted(content)
    }

    /// A digest: the heading (in bold, after the highest severity's label), then a list with a
    /// line per item, each title from `title_template` (plain in `body`, HTML-escaped in
    /// `formatted_body`), as many as fit, the rest counted ("…and 12 more").
    func content(for digest: TidingsPluginAPI.Digest) -> MatrixWire.Content {
        let plain = DigestText(digest, title: title.plain)
        let html = DigestText(digest, title: title.html)
        let label = SeverityLabel(digest.severity)
        let heading = (label.map { "\($0.text): " } ?? "") + plain.heading
        let htmlHeading = "<strong>" + (label?.html ?? "") + Markup.html.escape(html.heading) + "</strong>"
        let (plainLines, htmlLines) = (plain.plainLines, html.htmlLines)
        func content(_ shown: Int) -> MatrixWire.Content {
            MatrixWire.Content(
                msgtype: kind.rawValue, body: ([heading] + DigestText.kept(plainLines, shown)).joined(separator: "\n"),
                format: "org.matrix.custom.html",
                formatted_body: htmlHeading + "<ul>\n" + DigestText.kept(htmlLines, shown).map { "<li>\($0)</li>\n" }.joined() + "</ul>")
        }
        return Self.fitted(content(DigestText.shown(plainLines.count) { content($0).json.count <= Self.maxContentBytes }))
    }

    /// How a severity shows: a coloured label before the title (none for `info`).
    struct SeverityLabel {
        var text: String
        var color: String

        init?(_ severity: Severity) {
            switch severity {
            case .info: return nil
            case .warning:
                text = "Warning"
                color = "#c77c00"
            case .critical:
                text = "Critical"
                color = "#d00000"
            }
        }

        /// `<font color=…>Warning:</font> `, for `formatted_body`.
        var html: String { "<font color=\"\(color)\" data-mx-color=\"\(color)\">\(text):</font> " }
    }

    /// `content` within ``maxContentBytes``: a message too long loses its HTML (which cannot be
    /// cut safely) and its plain text is cut on a character boundary, ending in "…".
    static func fitted(_ content: MatrixWire.Content) -> MatrixWire.Content {
        guard content.json.count > maxContentBytes else { return content }
        var plain = MatrixWire.Content(msgtype: content.msgtype, body: content.body)
        var budget = maxContentBytes - 200
        while true {
            plain.body = content.body.cut(utf8Bytes: budget)
            let size = plain.json.count
            if size <= maxContentBytes { return plain }
            // JSON escapes made it longer than its bytes: shrink in proportion, a little more.
            budget = max(0, budget * maxContentBytes / size - 16)
        }
    }
}
