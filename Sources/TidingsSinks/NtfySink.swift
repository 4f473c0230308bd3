import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "ntfy"`: publishes each event to an ntfy topic (ntfy.sh or a self-hosted server).
///
/// Publishes as JSON to the server root (`POST {url}/`, body `{"topic", "message", "title",
/// "priority", "tags", "click"}`) rather than with headers, so a non-ASCII or multi-line title
/// needs no header encoding, and the topic (on ntfy.sh anyone who knows it can read it) never
/// sits in a URL that messages show.
///
/// Options: `url` (default `https://ntfy.sh`), `topic` (required), `token`* (access token) or
/// `username` + `password`*, `tags` (list), `title_template`, `body_template`.
///
/// Maps: severity → `priority` (info 3 = default, warning 4 = high, critical 5 = max); the event
/// URL (http/https) → `click`; the message cut to ntfy's 4,096-byte limit. Answers: 2xx must be
/// ntfy's message envelope; 401/403 (`{"code":40101,…}`) stop the sink until reload; 429 and 5xx
/// are retried (ntfy's 429 has no `Retry-After`, so the outbox's backoff paces it); other 4xx
/// (400 invalid, 413 too large) are dead letters. ntfy has no idempotency key in its publish
/// API: a publish whose answer was lost is sent again and may show twice.
///
/// A digest (quiet hours, `group_wait`) is one message: the digest's heading as the title, a
/// line per item, the highest severity's priority, `click` only when it has exactly one link.
package struct NtfySink: Sink {
    /// How the sink authenticates.
    package enum Auth: Sendable {
        case anonymous
        /// The whole `Authorization` value (`Bearer tk_…` or `Basic …`), registered as a secret.
        case header(Secret)
    }

    package var server: URL
    package var topic: String
    package var auth: Auth
    package var tags: [String]
    package var text: PushText
    package var client: any HTTPClient

    package init(server: URL, topic: String, auth: Auth = .anonymous, tags: [String] = [], text: PushText, client: any HTTPClient) {
        self.server = server
        self.topic = topic
        self.auth = auth
        self.tags = tags
        self.text = text
        self.client = client
    }

    /// ntfy's default server.
    package static let defaultServer = URL(string: "https://ntfy.sh")!

    /// The message: ntfy takes 4,096 bytes; longer ones become attachments. Counted as written in
    /// the JSON, which keeps the whole body within the server's limit for a JSON publish (twice
    /// the message limit) together with ``titleLimit`` and ``clickLimit``.
    static let messageLimit = LengthLimit(4096, .jsonBytes)
    /// ntfy documents no title limit; this one leaves room in the JSON body.
    static let titleLimit = LengthLimit(1024, .jsonBytes)
    static let clickLimit = LengthLimit(2048, .utf8Bytes)

    /// ntfy's topic names (its server's `topicRegex`).
    static func isValidTopic(_ t: String) -> Bool {
        (1...64).contains(t.utf8.count)
            && t.utf8.allSatisfy { b in
                (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2D || b == 0x5F
            }
    }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "ntfy", summary: "push to phones through an ntfy topic (ntfy.sh or self-hosted)") { o, setup in
        let server = try o.httpURL("url", default: NtfySink.defaultServer)
        let topic = try o.requiredString("topic")
        guard NtfySink.isValidTopic(topic) else {
            throw o.error("topic", "\(o.what): 'topic' must be 1 to 64 letters, digits, '-' or '_' (as ntfy requires), not \"\(topic)\"")
        }
        let token = try o.secret("token", required: false)
        let username = try o.string("username")
        let password = try o.secret("password", required: false)
        let auth: Auth
        switch (token, username, password) {
        case (nil, nil, nil):
            auth = .anonymous
        case (let token?, nil, nil):
            auth = .header(Secret("Bearer " + token.value, shape: .headerValue))
        case (nil, let user?, let password?):
            guard !user.isEmpty, !user.contains(":") else { throw o.error("username", "\(o.what): 'username' must be non-empty and without ':'") }
            auth = .header(Secret("Basic " + Data("\(user):\(password.value)".utf8).base64EncodedString(), shape: .headerValue))
        case (_?, _, _):
            throw o.error("token", "\(o.what): set either 'token' or 'username' + 'password', not both")
        case (nil, _?, nil):
            throw o.error("username", "\(o.what): 'username' needs 'password' (or 'password_file', 'password_env', 'password_credential')")
        case (nil, nil, _?):
            throw o.error(nil, "\(o.what): 'password' needs 'username'")
        }
        return NtfySink(
            server: server, topic: topic, auth: auth, tags: try o.stringList("tags") ?? [],
            text: try PushText.options(o), client: setup.http)
    }

    /// Publishes each event (one request each).
    package func deliver(_ events: [Event]) async throws {
        for e in events { try await publish(e) }
    }

    /// ntfy's priority for a severity: default, high, max.
    static func priority(_ s: Severity) -> Int {
        switch s {
        case .info: return 3
        case .warning: return 4
        case .critical: return 5
        }
    }

    /// The JSON publish body for `e`.
    package func body(_ e: Event) -> JSONValue {
        body(text.render(e, title: Self.titleLimit, message: Self.messageLimit), e.severity, click: PushText.link(e, limit: Self.clickLimit))
    }

    /// The JSON publish body for a digest: its heading as the title, a line per item, the
    /// highest severity's priority, and `click` only when the digest has exactly one link.
    package func body(_ d: Digest) -> JSONValue {
        body(text.render(d, title: Self.titleLimit, message: Self.messageLimit), d.severity, click: PushText.link(d, limit: Self.clickLimit))
    }

    private func body(_ text: PushText.Rendered, _ severity: Severity, click: String?) -> JSONValue {
        var o: [String: JSONValue] = ["topic": .string(topic), "message": .string(text.message), "priority": .number(Double(Self.priority(severity)))]
        if let title = text.title { o["title"] = .string(title) }
        if !tags.isEmpty { o["tags"] = .array(tags.map { .string($0) }) }
        if let click { o["click"] = .string(click) }
        return .object(o)
    }

    /// The root URL JSON is published to (`{url}/`).
    var publishURL: URL {
        guard var c = URLComponents(url: server, resolvingAgainstBaseURL: false), !c.path.hasSuffix("/") else { return server }
        c.path += "/"
        return c.url ?? server
    }

    /// The request for `e` (without network I/O; tests inspect it).
    package func request(_ e: Event) -> HTTPRequest { request(body(e)) }

    /// The request publishing `body` (a ``body(_:)-(Event)`` or a digest's).
    package func request(_ body: JSONValue) -> HTTPRequest {
        var headers = [("Content-Type", "application/json")]
        if case .header(let value) = auth { headers.append(("Authorization", value.value)) }
        return HTTPRequest(
            method: "POST", url: publishURL, headers: headers, body: Data(body.jsonString().utf8),
            timeout: 15, maxBody: 1 << 20, redirects: .never)
    }

    var delivery: HTTPDelivery { HTTPDelivery(endpoint: "ntfy POST \(HTTPDelivery.display(publishURL))", client: client) }

    func publish(_ e: Event) async throws { try await publish(body(e)) }

    func publish(_ body: JSONValue) async throws {
        let response = try await delivery.send(request(body))
        try Self.checkEnvelope(response, endpoint: delivery.endpoint)
    }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws { try await publish(body(digest)) }

    /// A 2xx must be ntfy's answer to a publish (the message envelope, `"event": "message"`):
    /// anything else means `url` is not an ntfy server, and nothing was published.
    static func checkEnvelope(_ r: HTTPResponse, endpoint: String) throws {
        if let o = try? JSONValue.parse(r.body), o["id"]?.stringValue != nil, o["event"]?.stringValue == "message" { return }
        throw DeliveryError(.gone, "\(endpoint): HTTP \(r.status) but not an ntfy message envelope (is 'url' an ntfy server?)" + HTTPDelivery.excerpt(r.body))
    }
}
