import FoundationEssentials
import Logging
import TidingsCrypto
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "webhook"`: POSTs the event JSON (DESIGN §4) to `url`, signed per Standard Webhooks
/// when a `secret` is set.
///
/// Options: `url` (required, http or https), `headers` (table of extra headers; values may be
/// secrets, ``OptionReader/headers(_:)``), `batch` (false: one POST per event; true: one JSON
/// array per poll), `secret` / `secret_file` / `secret_env` / `secret_credential` (`whsec_…`),
/// `timeout` (default "15s"), `body_template` (a Mustache template whose text is sent instead of
/// the event JSON: Microsoft Teams, Google Chat, any JSON API) with `content_type` (default
/// `application/json`; with a JSON type `{{name}}` is escaped for inside a JSON string). The
/// signature covers exactly the bytes sent. `body_template` is for one event per request, so it
/// does not go with `batch = true`.
///
/// Delivery outcome, for the outbox: as ``HTTPDelivery`` says (2xx delivered; network error,
/// timeout, 408, 425, 429 and 5xx retried honouring `Retry-After`; 410, 301 and 308 disable the
/// sink until reload; other 3xx retried; redirects never followed), except that a 401 or 403 is
/// a dead letter for that one message rather than a dead sink.
package struct WebhookSink: Sink, TemplatedSink {
    /// Where to POST.
    package var url: URL
    /// Extra headers (`Content-Type` and the `webhook-*` headers are always the sink's own).
    package var headers: [(String, String)]
    /// One JSON array per poll instead of one POST per event.
    package var batch: Bool
    /// Signs requests when set (a `secret` is configured).
    package var signature: WebhookSignature?
    /// Whole-request deadline, seconds.
    package var timeout: TimeInterval
    /// The HTTP seam (tests pass a fake).
    package var client: any HTTPClient
    /// The clock for `webhook-timestamp` (tests pin it).
    package var now: @Sendable () -> Date
    /// What a request carries: the event JSON, or a `body_template`'s text.
    package var payload = Payload.event

    /// The body of a request.
    package enum Payload: Sendable, Equatable {
        /// The event JSON (DESIGN §4), or for a batch a JSON array of events.
        case event
        /// `body_template` rendered for the one event, sent as `contentType`.
        case template(MessageTemplate, contentType: String)

        /// The default `content_type` of a `body_template`.
        package static let defaultContentType = "application/json"

        var contentType: String {
            if case .template(_, let type) = self { return type }
            return "application/json"
        }
    }

    /// A webhook sink; `client` is the process's shared one (``SinkSetup/http``).
    package init(
        url: URL, headers: [(String, String)] = [], batch: Bool = false, signature: WebhookSignature? = nil,
        timeout: TimeInterval = 15, client: any HTTPClient, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.url = url
        self.headers = headers
        self.batch = batch
        self.signature = signature
        self.timeout = timeout
        self.client = client
        self.now = now
    }

    /// Batches only with `batch = true`.
    package var acceptsBatches: Bool { batch }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "webhook", summary: "POST events as JSON, signed per Standard Webhooks") { o, setup in
        let url = try o.requestURL("url")
        var signature: WebhookSignature?
        if let secret = try o.secret("secret", required: false) {
            let key = o.has("secret") ? "secret" : o.has("secret_file") ? "secret_file" : "secret_env"
            do { signature = try WebhookSignature(secret: secret.value) } catch {
                throw o.error(key, "\(o.what): \(error)")
            }
            // Signing needs libcrypto (loaded now, not linked: DESIGN §15).
            if let missing = libcryptoUnavailable() { throw o.error(key, "\(o.what): cannot sign: \(missing)") }
        }
        var sink = WebhookSink(
            url: url, headers: try o.headers().pairs, batch: try o.bool("batch") ?? false,
            signature: signature, timeout: try o.duration("timeout", minimum: 1) ?? 15, client: setup.http)
        sink.payload = try payload(o, batch: sink.batch)
        return sink
    }

    /// `body_template` and `content_type`, or the event JSON without them.
    static func payload(_ o: OptionReader, batch: Bool) throws -> Payload {
        let contentType = try o.string("content_type")
        guard o.has("body_template") else {
            if contentType != nil {
                throw o.error("content_type", "\(o.what): 'content_type' goes with 'body_template' (the event JSON is always application/json)")
            }
            return .event
        }
        if batch {
            throw o.error("body_template", "\(o.what): 'body_template' renders one event per request: it does not go with 'batch = true'")
        }
        let type = contentType ?? Payload.defaultContentType
        guard !type.isEmpty, HeaderTable.isValidValue(type) else {
            throw o.error("content_type", "\(o.what): 'content_type' must be a media type like \"application/json\"")
        }
        let markup = Markup.forContentType(type)
        let template = try MessageTemplate.option(o, "body_template", default: "", markup: markup)
        if markup == .json, let problem = template.jsonProblem() {
            o.warning("body_template", "\(o.what): 'body_template' is sent as \(type), but for a sample event it renders text that is not JSON (\(problem))")
        }
        return .template(template, contentType: type)
    }

    package var templates: KeyValuePairs<String, MessageTemplate> {
        if case .template(let t, _) = payload { return ["body_template": t] }
        return [:]
    }

    /// POSTs the events (or the batch); the first failure throws, classified for the outbox.
    package func deliver(_ events: [Event]) async throws {
        guard !events.isEmpty else { return }
        if batch {
            try await post(id: Self.messageID(for: events), body: Self.body(events, asArray: true))
        } else {
            for e in events { try await post(id: e.id, body: body(for: e)) }
        }
    }

    /// The `webhook-id`: the event id, or for a batch of several a digest of their ids, so it is
    /// the same on every retry of the same batch.
    package static func messageID(for events: [Event]) -> String {
        if events.count == 1 { return events[0].id }
        let digest = SHA256.hash(events.map(\.id).joined(separator: ",").utf8)
        return "batch_" + hexString(digest.prefix(16))
    }

    /// What a request for the one event `e` carries.
    func body(for e: Event) -> Data {
        switch payload {
        case .event: return Self.body([e], asArray: false)
        case .template(let template, _): return Data(template.render(e).utf8)
        }
    }

    /// The request body: one event object, or a JSON array of them.
    package static func body(_ events: [Event], asArray: Bool) -> Data {
        asArray ? Data(("[" + events.map { $0.jsonLine() }.joined(separator: ",") + "]").utf8) : Data(events[0].jsonLine().utf8)
    }

    /// The request this sink sends for one message (without network I/O; tests inspect it).
    package func request(id: String, body: Data) -> HTTPRequest {
        let timestamp = Int(now().timeIntervalSince1970)
        var h = headers.filter { !["content-type", "webhook-id", "webhook-timestamp", "webhook-signature"].contains($0.0.lowercased()) }
        h.append(("Content-Type", payload.contentType))
        h.append(("webhook-id", id))
        h.append(("webhook-timestamp", String(timestamp)))
        if let signature { h.append(("webhook-signature", signature.sign(id: id, timestamp: timestamp, body: body))) }
        return HTTPRequest(method: "POST", url: url, headers: h, body: body, timeout: timeout, maxBody: 1 << 20, redirects: .never)
    }

    /// How this sink's requests are sent and judged: a 401/403 is one refused message (a
    /// receiver checking each signature), not a dead sink.
    var delivery: HTTPDelivery {
        HTTPDelivery(endpoint: "POST \(HTTPDelivery.display(url))", client: client, onAuthFailure: .deadLetter)
    }

    func post(id: String, body: Data) async throws {
        try await delivery.send(request(id: id, body: body))
    }

    /// Maps a response to the outbox's terms; nil means delivered.
    package func classify(_ r: HTTPResponse) -> DeliveryError? {
        if case .failed(let error) = delivery.outcome(of: r, url: url) { return error }
        return nil
    }
}
