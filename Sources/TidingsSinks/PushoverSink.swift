import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "pushover"`: sends each event through the Pushover message API.
///
/// `POST {api_url}` (default `https://api.pushover.net/1/messages.json`), JSON `{"token",
/// "user", "message", "title", "priority", "url", "timestamp"}`: the credentials travel in the
/// body, never in a URL.
///
/// Options: `user_key`* (user or group key), `api_token`* (the application's token), `api_url`,
/// `title_template`, `body_template`.
///
/// Maps: severity → `priority` (info 0 normal, warning 1 high, critical 1 high: high bypasses the
/// user's quiet hours; 2, emergency, repeats until acknowledged and is never sent); the event URL
/// (http/https, whole, at most 512 characters) → `url`; the event's `observed_at` → `timestamp`,
/// so a delivery that waited in the outbox shows when it happened. Text is plain (no `html=1`):
/// title cut to 250 and message to 1,024 characters. Pushover has no idempotency key. A digest
/// (quiet hours, `group_wait`) is one message, with as many of its lines as fit.
///
/// Answers, as Pushover documents them: 200 `{"status":1}`; a 4xx `{"status":0,"errors":[…]}` is
/// not retried: with `"token":"invalid"` or `"user":"invalid"` (and on 401/403) the sink stops
/// until reload, otherwise a dead letter; 429 (the application's monthly limit) waits until
/// `X-Limit-App-Reset`; 5xx and network errors are retried, at most once every 5 seconds.
package struct PushoverSink: Sink {
    package var apiURL: URL
    package var userKey: Secret
    package var apiToken: Secret
    package var text: PushText
    package var client: any HTTPClient

    package init(apiURL: URL = PushoverSink.defaultAPI, userKey: Secret, apiToken: Secret, text: PushText, client: any HTTPClient) {
        self.apiURL = apiURL
        self.userKey = userKey
        self.apiToken = apiToken
        self.text = text
        self.client = client
    }

    package static let defaultAPI = URL(string: "https://api.pushover.net/1/messages.json")!

    /// Pushover's documented limits.
    static let titleLimit = LengthLimit(250, .characters)
    static let messageLimit = LengthLimit(1024, .characters)
    static let urlLimit = LengthLimit(512, .characters)
    /// "Resend no more than once every 5 seconds" after a 5xx.
    static let serverErrorWait: TimeInterval = 5

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "pushover", summary: "push to phones through Pushover") { o, setup in
        PushoverSink(
            apiURL: try o.httpURL("api_url", default: PushoverSink.defaultAPI),
            userKey: try o.secret("user_key", required: true)!, apiToken: try o.secret("api_token", required: true)!,
            text: try PushText.options(o), client: setup.http)
    }

    /// Sends each event (one request each).
    package func deliver(_ events: [Event]) async throws {
        for e in events { try await send(e) }
    }

    /// Pushover's priority for a severity (see the type's documentation).
    static func priority(_ s: Severity) -> Int {
        switch s {
        case .info: return 0
        case .warning, .critical: return 1
        }
    }

    /// The JSON body for `e`.
    package func body(_ e: Event) -> JSONValue {
        body(text.render(e, title: Self.titleLimit, message: Self.messageLimit), e.severity, at: e.observedAt, url: PushText.link(e, limit: Self.urlLimit))
    }

    /// The JSON body for a digest: its heading, a line per item (as many as fit Pushover's
    /// 1,024 characters), the highest severity's priority, the newest event's time, a URL only
    /// when the digest has exactly one link.
    package func body(_ d: Digest) -> JSONValue {
        body(
            text.render(d, title: Self.titleLimit, message: Self.messageLimit), d.severity,
            at: d.events.map(\.observedAt).max() ?? Date(), url: PushText.link(d, limit: Self.urlLimit))
    }

    private func body(_ text: PushText.Rendered, _ severity: Severity, at time: Date, url: String?) -> JSONValue {
        var o: [String: JSONValue] = [
            "token": .string(apiToken.value), "user": .string(userKey.value), "message": .string(text.message),
            "priority": .number(Double(Self.priority(severity))),
            "timestamp": .number(time.timeIntervalSince1970.rounded(.down)),
        ]
        if let title = text.title { o["title"] = .string(title) }
        if let url { o["url"] = .string(url) }
        return .object(o)
    }

    /// The request for `e` (without network I/O; tests inspect it).
    package func request(_ e: Event) -> HTTPRequest { request(body(e)) }

    /// The request sending `body` (an event's or a digest's).
    package func request(_ body: JSONValue) -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: apiURL, headers: [("Content-Type", "application/json")],
            body: Data(body.jsonString().utf8), timeout: 15, maxBody: 1 << 20, redirects: .never)
    }

    var delivery: HTTPDelivery { HTTPDelivery(endpoint: "pushover POST \(HTTPDelivery.display(apiURL))", client: client) }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws { try await send(body(digest)) }

    func send(_ e: Event) async throws { try await send(body(e)) }

    func send(_ body: JSONValue) async throws {
        let response = try await delivery.send(request(body), judge: judge)
        guard Answer(response.body)?.status == 1 else {
            throw DeliveryError(
                .gone,
                "\(delivery.endpoint): HTTP \(response.status) without \"status\": 1 (is 'api_url' the Pushover API?)" + HTTPDelivery.excerpt(response.body))
        }
    }

    /// Pushover's answer body: `{"status", "request", "errors", "token", "user"}`.
    struct Answer {
        var status: Int?
        var errors: [String]
        /// The parameters Pushover named invalid (`"token": "invalid"`).
        var invalid: Set<String>

        init?(_ body: Data) {
            guard let o = try? JSONValue.parse(body), case .object(let members) = o else { return nil }
            status = o["status"]?.doubleValue.flatMap { Int(exactly: $0) }
            errors = o["errors"]?.arrayValue?.compactMap(\.stringValue) ?? []
            invalid = Set(members.compactMap { $0.value.stringValue == "invalid" ? $0.key : nil })
        }
    }

    /// Pushover's own answers; the rest is ``HTTPDelivery``'s standard mapping.
    func judge(_ r: HTTPResponse) -> HTTPDelivery.Outcome? {
        let answer = Answer(r.body)
        let reason = answer.map { $0.errors.isEmpty ? "" : HTTPDelivery.excerpt(Data($0.errors.joined(separator: "; ").utf8)) } ?? HTTPDelivery.excerpt(r.body)
        let what = "\(delivery.endpoint): HTTP \(r.status)" + reason
        switch r.status {
        case 429:
            return .failed(DeliveryError(.retryable, what + Self.limitNote(r), retryAfter: Self.resetWait(r) ?? r.retryAfter))
        case 500...599:
            return .failed(DeliveryError(.retryable, what, retryAfter: max(r.retryAfter ?? 0, Self.serverErrorWait)))
        case 400..<500:
            let invalid = Self.credentialOptions.filter { answer?.invalid.contains($0.key) == true }.map(\.value).sorted()
            if !invalid.isEmpty {
                return .failed(DeliveryError(.gone, what + " (Pushover says \(invalid.joined(separator: " and ")) is invalid: fix it, then reload)"))
            }
            // Pushover's own refusal of this message (`"status": 0` with its reasons): "do not
            // resend". Other 4xx (a proxy's 401, 403, 408…) go by the standard mapping.
            guard answer?.status == 0, ![401, 403, 408, 410, 425].contains(r.status) else { return nil }
            return .failed(DeliveryError(.permanent, what))
        default:
            return nil
        }
    }

    /// Pushover's parameter names for the sink's credentials → the options that give them.
    static let credentialOptions = ["token": "api_token", "user": "user_key"]

    /// When the application's monthly counter resets (`X-Limit-App-Reset`, Unix time).
    static func reset(_ r: HTTPResponse) -> Date? {
        guard let raw = r.header("x-limit-app-reset"), let t = Double(raw.trimmed(newlines: false)), t.isFinite else { return nil }
        return Date(timeIntervalSince1970: t)
    }

    /// The wait until ``reset(_:)``, within what the outbox honours.
    static func resetWait(_ r: HTTPResponse, now: Date = Date()) -> TimeInterval? {
        reset(r).map { min(max(0, $0.timeIntervalSince(now)), HTTPResponse.maxRetryAfter) }
    }

    /// ` (the application's monthly limit of N messages is used up until …)`, from `X-Limit-App-*`.
    static func limitNote(_ r: HTTPResponse) -> String {
        let limit = r.header("x-limit-app-limit").flatMap { Int($0.trimmed(newlines: false)) }.map { " of \($0) messages" } ?? ""
        let until = reset(r).map { " until \(Timestamp.format($0))" } ?? ""
        return " (the application's monthly limit\(limit) is used up\(until))"
    }
}
