import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "gotify"`: posts each event to a self-hosted Gotify server as a message of one
/// application.
///
/// `POST {url}/message` with the application token in the `X-Gotify-Key` header (never in the
/// query string, so it is in no URL), JSON `{"title", "message", "priority", "extras"}`.
///
/// Options: `url` (the server, required), `token`* (the application's token), `title_template`,
/// `body_template`.
///
/// Maps: severity → `priority` by what the Gotify Android app does with it (0 no notification,
/// 1–3 silent, 4–7 with sound, 8–10 also pops up): info 5, warning 8, critical 10; the event URL
/// (http/https) → `extras["client::notification"].click.url`; the message is declared plain text
/// (`client::display` `text/plain`), so remote markdown is shown, not rendered. Gotify documents
/// no length limits and has no idempotency key. Answers: 2xx must be the stored message; 401/403
/// (`{"error","errorCode","errorDescription"}`) stop the sink until reload; 429 and 5xx are
/// retried; other 4xx are dead letters. A digest (quiet hours, `group_wait`) is one message.
package struct GotifySink: Sink {
    package var server: URL
    /// The application token, sent as `X-Gotify-Key`.
    package var token: Secret
    package var text: PushText
    package var client: any HTTPClient

    package init(server: URL, token: Secret, text: PushText, client: any HTTPClient) {
        self.server = server
        self.token = token
        self.text = text
        self.client = client
    }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "gotify", summary: "push to phones through a self-hosted Gotify server") { o, setup in
        GotifySink(
            server: try o.httpURL("url"), token: try o.secret("token", required: true)!,
            text: try PushText.options(o), client: setup.http)
    }

    /// Posts each event (one request each).
    package func deliver(_ events: [Event]) async throws {
        for e in events { try await post(e) }
    }

    /// Gotify's priority for a severity (see the type's documentation).
    static func priority(_ s: Severity) -> Int {
        switch s {
        case .info: return 5
        case .warning: return 8
        case .critical: return 10
        }
    }

    /// Gotify documents no length limit; these only keep one message bounded.
    static let titleLimit = LengthLimit(1024, .characters)
    static let messageLimit = LengthLimit(65_536, .characters)
    static let clickLimit = LengthLimit(8192, .utf8Bytes)

    /// The JSON body for `e`.
    package func body(_ e: Event) -> JSONValue {
        body(text.render(e, title: Self.titleLimit, message: Self.messageLimit), e.severity, click: PushText.link(e, limit: Self.clickLimit))
    }

    /// The JSON body for a digest: its heading, a line per item, the highest severity's
    /// priority, a click URL only when the digest has exactly one link.
    package func body(_ d: Digest) -> JSONValue {
        body(text.render(d, title: Self.titleLimit, message: Self.messageLimit), d.severity, click: PushText.link(d, limit: Self.clickLimit))
    }

    private func body(_ text: PushText.Rendered, _ severity: Severity, click: String?) -> JSONValue {
        var extras: [String: JSONValue] = ["client::display": ["contentType": "text/plain"]]
        if let click { extras["client::notification"] = ["click": ["url": .string(click)]] }
        var o: [String: JSONValue] = [
            "message": .string(text.message), "priority": .number(Double(Self.priority(severity))), "extras": .object(extras),
        ]
        if let title = text.title { o["title"] = .string(title) }
        return .object(o)
    }

    /// `{url}/message`.
    var messageURL: URL { server.appendingPathComponent("message") }

    /// The request for `e` (without network I/O; tests inspect it).
    package func request(_ e: Event) -> HTTPRequest { request(body(e)) }

    /// The request posting `body` (an event's or a digest's).
    package func request(_ body: JSONValue) -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: messageURL,
            headers: [("Content-Type", "application/json"), ("X-Gotify-Key", token.value)],
            body: Data(body.jsonString().utf8), timeout: 15, maxBody: 1 << 20, redirects: .never)
    }

    var delivery: HTTPDelivery { HTTPDelivery(endpoint: "gotify POST \(HTTPDelivery.display(messageURL))", client: client) }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws { try await post(body(digest)) }

    func post(_ e: Event) async throws { try await post(body(e)) }

    func post(_ body: JSONValue) async throws {
        let response = try await delivery.send(request(body))
        // A 2xx is the stored message; anything else means `url` is not a Gotify server.
        if let o = try? JSONValue.parse(response.body), o["id"]?.doubleValue != nil { return }
        throw DeliveryError(
            .gone, "\(delivery.endpoint): HTTP \(response.status) but not a Gotify message (is 'url' a Gotify server?)" + HTTPDelivery.excerpt(response.body))
    }
}
