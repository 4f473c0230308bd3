import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// One channel message over HTTP, in the outbox's terms.
///
/// Sends through the process's shared client (``SinkSetup/http``), never follows a redirect (a
/// re-sent POST may lose its body, and a redirect may lead a token elsewhere), and turns the
/// answer into what the outbox acts on:
///
/// | answer | outcome |
/// |---|---|
/// | 2xx | delivered |
/// | network error, timeout, 408, 425, 429, 5xx | retryable, honouring `Retry-After` |
/// | 401, 403 | the sink is dead until reload (``AuthFailure/deadSink``), or a dead letter |
/// | 410 | the sink is dead until reload |
/// | 301, 308 | the sink is dead until reload (its URL must be updated), naming the `Location` |
/// | other 3xx | retryable, naming the `Location` |
/// | other 4xx | a dead letter: this message will never be accepted |
///
/// Messages name the endpoint as the channel chose (``endpoint``: no user info, query or secret
/// path) and carry an excerpt of the body through ``Redactor``. A channel file adds only what is
/// special about its API: the request, and its own error shapes through `judge`.
package struct HTTPDelivery: Sendable {
    /// What a 401 or 403 means for the sink.
    package enum AuthFailure: Sendable {
        /// The credentials are wrong: stop the sink until reload, keep its messages.
        case deadSink
        /// This one message was refused (a receiver that checks each request): dead letter.
        case deadLetter
    }

    /// The answer to one request, as the outbox sees it.
    package enum Outcome: Sendable {
        case delivered
        case failed(DeliveryError)
    }

    /// How messages name the endpoint, e.g. `POST https://ntfy.sh/alerts`.
    package var endpoint: String
    package var client: any HTTPClient
    package var onAuthFailure: AuthFailure

    package init(endpoint: String, client: any HTTPClient, onAuthFailure: AuthFailure = .deadSink) {
        self.endpoint = endpoint
        self.client = client
        self.onAuthFailure = onAuthFailure
    }

    /// Sends `request` (redirects forced off) and returns the 2xx response, for channels that
    /// read it; any other outcome throws a ``DeliveryError``. `judge` sees the response first and
    /// may settle it (a channel's own rate-limit or error body); nil leaves it to ``outcome(of:)``.
    @discardableResult
    package func send(_ request: HTTPRequest, judge: (HTTPResponse) -> Outcome? = { _ in nil }) async throws -> HTTPResponse {
        var request = request
        request.redirects = .never
        let response: HTTPResponse
        do {
            response = try await client.send(request)
        } catch is CancellationError {
            throw DeliveryError(.retryable, "\(endpoint): cancelled")
        } catch {
            throw DeliveryError(.retryable, "\(endpoint): \(error)")
        }
        switch judge(response) ?? outcome(of: response, url: request.url) {
        case .delivered: return response
        case .failed(let error): throw error
        }
    }

    /// The standard mapping of a response (the table above); `url` resolves a relative `Location`.
    package func outcome(of r: HTTPResponse, url: URL) -> Outcome {
        let what = "\(endpoint): HTTP \(r.status)" + Self.excerpt(r.body)
        switch r.status {
        case 200..<300:
            return .delivered
        case 408, 425, 429, 500...599:
            return .failed(DeliveryError(.retryable, what, retryAfter: r.retryAfter))
        case 401, 403:
            switch onAuthFailure {
            case .deadSink: return .failed(DeliveryError(.gone, what + " (authentication failed: check the sink's credentials, then reload)"))
            case .deadLetter: return .failed(DeliveryError(.permanent, what))
            }
        case 410:
            return .failed(DeliveryError(.gone, what + " (the receiver says this endpoint is gone)"))
        case 301, 308:
            return .failed(
                DeliveryError(
                    .gone,
                    "\(endpoint): HTTP \(r.status), moved permanently to \(Self.location(r, from: url)); sinks do not follow redirects: update the sink's url"))
        case 300..<400:
            return .failed(
                DeliveryError(
                    .retryable, "\(endpoint): HTTP \(r.status) redirect to \(Self.location(r, from: url)); sinks do not follow redirects",
                    retryAfter: r.retryAfter))
        default:
            return .failed(DeliveryError(.permanent, what))
        }
    }

    /// A URL for messages: without user info or query (either may carry a token).
    package static func display(_ url: URL) -> String { ShownURL.of(url, query: false) }

    /// A redirect's target, for messages (as ``display(_:)`` shows URLs).
    static func location(_ r: HTTPResponse, from url: URL) -> String {
        guard let raw = r.header("location"), !raw.isEmpty else { return "(no Location)" }
        return URL(string: raw, relativeTo: url).map { display($0.absoluteURL) } ?? Redirect.display(raw)
    }

    /// `: <start of the body>`, redacted and escaped, or nothing for an empty body.
    package static func excerpt(_ body: Data) -> String {
        let text = Redactor.shared.excerpt(body)
        return text.isEmpty ? "" : ": \(text)"
    }
}
