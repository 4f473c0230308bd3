import FoundationEssentials
import Logging

/// HTTP validators remembered between polls for conditional requests.
package struct Validators: Sendable, Equatable, Codable {
    package var etag: String?
    package var lastModified: String?
    package init(etag: String? = nil, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Reads `ETag` / `Last-Modified` from a response.
    package init(from response: HTTPResponse) {
        self.init(etag: response.header("etag"), lastModified: response.header("last-modified"))
    }

    /// `If-None-Match` / `If-Modified-Since` headers for the next request.
    package var requestHeaders: [(String, String)] {
        var h: [(String, String)] = []
        if let etag { h.append(("If-None-Match", etag)) }
        if let lastModified { h.append(("If-Modified-Since", lastModified)) }
        return h
    }
}

/// What one poll saw, and how soon the remote allows the next one.
package struct PollResult: Sendable {
    package enum Content: Sendable {
        /// The complete current set of items (the core de-duplicates it against state).
        case snapshot([Item], validators: Validators)
        /// The server said nothing changed (HTTP 304): a successful poll with no change.
        case notModified
        /// The complete current set, under identities the remote has renumbered (an IMAP
        /// mailbox's new `UIDVALIDITY`): a new baseline. The stored items are forgotten and these
        /// are stored, silently (unless `notify_existing`), never a flood of removed and new events.
        case rebaseline([Item], validators: Validators)
    }

    package var content: Content
    /// The remote's own minimum time between polls (e.g. GitHub's `X-Poll-Interval`): the
    /// source is never polled sooner, whatever its configured interval. The core stores it
    /// with the source's state (a restart or `tidings check` obeys it too); nil: none, and a
    /// value stored by an earlier poll no longer applies.
    package var minimumInterval: TimeInterval?

    package init(_ content: Content, minimumInterval: TimeInterval? = nil) {
        self.content = content
        self.minimumInterval = minimumInterval
    }

    /// The complete current set of items.
    package static func snapshot(_ items: [Item], validators: Validators = Validators()) -> PollResult {
        PollResult(.snapshot(items, validators: validators))
    }

    /// The complete current set under renumbered identities: a new silent baseline.
    package static func rebaseline(_ items: [Item], validators: Validators = Validators()) -> PollResult {
        PollResult(.rebaseline(items, validators: validators))
    }

    /// Nothing changed (HTTP 304).
    package static var notModified: PollResult { PollResult(.notModified) }

    /// The items and validators of a snapshot or rebaseline (`renumbered` for the latter); nil for `notModified`.
    package var items: (items: [Item], validators: Validators, renumbered: Bool)? {
        switch content {
        case .snapshot(let items, let validators): return (items, validators, false)
        case .rebaseline(let items, let validators): return (items, validators, true)
        case .notModified: return nil
        }
    }

    /// The longest minimum interval honoured: a remote asking for more gets a poll a day.
    package static let maxMinimumInterval: TimeInterval = 86_400

    /// This result with the remote's minimum interval (non-finite or non-positive: none).
    package func paced(every seconds: TimeInterval?) -> PollResult {
        var r = self
        r.minimumInterval = seconds.flatMap { $0.isFinite && $0 > 0 ? min($0, Self.maxMinimumInterval) : nil }
        return r
    }
}

/// Everything a provider may use during a poll. Providers never touch state.
package struct PollContext: Sendable {
    package var source: String
    package var http: any HTTPClient
    /// Validators from the previous successful poll.
    package var validators: Validators
    /// Deadline for the whole poll, seconds.
    package var timeout: TimeInterval
    /// Largest response body accepted.
    package var maxBody: Int
    package var logger: Logger
    package var now: Date
    /// IMAP, for mail providers: by default the shared client's, when it reads mailboxes.
    package var mailbox: (any MailboxReader)?
    /// The source's `refuse_private_redirects`, for every request it sends.
    package var privateRedirects: PrivateRedirects

    package init(
        source: String, http: any HTTPClient, validators: Validators = Validators(), timeout: TimeInterval = 30,
        maxBody: Int = 10 << 20, logger: Logger, now: Date = Date(), mailbox: (any MailboxReader)? = nil,
        privateRedirects: PrivateRedirects = .auto
    ) {
        self.source = source
        self.http = http
        self.mailbox = mailbox ?? (http as? any MailboxReader)
        self.validators = validators
        self.timeout = timeout
        self.maxBody = maxBody
        self.logger = logger
        self.now = now
        self.privateRedirects = privateRedirects
    }

    /// Sends a request with this poll's timeout and body limit.
    ///
    /// - `credentials`: whether the request carries secrets (in headers or body). With
    ///   ``Credentials/sent`` it is never redirected off its scheme, host and port; without,
    ///   it follows redirects anywhere except from https to http.
    /// - The response body passes through ``Redactor``: a server that echoes a credential
    ///   cannot plant it in items, events or the state.
    /// - `caFile`: the source's `ca_file`, trusted for https instead of the system's CAs.
    package func send(
        _ method: String = "GET", _ url: URL, headers: [(String, String)] = [], body: Data? = nil,
        credentials: Credentials, caFile: String? = nil
    ) async throws -> HTTPResponse {
        do {
            var response = try await http.send(
                HTTPRequest(
                    method: method, url: url, headers: headers, body: body, timeout: timeout, maxBody: maxBody,
                    redirects: credentials.redirects, caFile: caFile, privateRedirects: privateRedirects))
            response.body = Redactor.shared.scrub(response.body)
            return response
        } catch let e as HTTPClientError {
            throw PollError(.transient, e.description)
        }
    }
}

/// Whether a provider's request carries credentials. The provider knows; it says so when it
/// sends (where redirects may lead) and when it maps an error status (what a 401/403 means).
package enum Credentials: Sendable, Equatable {
    /// A public request: a 401/403 is an ordinary failure, retried with backoff.
    case notSent
    /// Secrets in headers or body: a 401/403 means they were rejected (`auth-failed`).
    case sent

    /// Where a request may be redirected: credentials stay on the configured origin.
    package var redirects: RedirectPolicy { self == .sent ? .sameOrigin : .anyOrigin }
}

/// A provider knows one remote system: it fetches the current items. It never decides what is new.
package protocol Provider: Sendable {
    /// Host this provider talks to, for `max_per_host` (nil for local work such as exec).
    var host: String? { get }
    /// Runs before the first poll after start or reload (e.g. a credential check).
    func prepare(_ context: PollContext) async throws
    /// Fetches the current items.
    func poll(_ context: PollContext) async throws -> PollResult
    /// Whether a snapshot is the whole set (the default): an item missing from it is gone, a
    /// `removed` event. False for a window onto a longer list, such as a feed's latest entries:
    /// an item that leaves the window is forgotten quietly, and one that comes back within
    /// `history_days` is the same item again (changed only if its fingerprint moved), never new.
    var snapshotIsComplete: Bool { get }
}

extension Provider {
    package var host: String? { nil }
    package var snapshotIsComplete: Bool { true }
    package func prepare(_ context: PollContext) async throws {}
}

/// Why a poll failed, in the terms the scheduler acts on.
package struct PollError: Error, CustomStringConvertible, Sendable {
    package enum Category: String, Sendable {
        /// Credentials rejected: do not retry until the config changes.
        case auth
        /// 429 / 503: wait at least `retryAfter`.
        case rateLimited
        /// Network trouble, 5xx, timeouts, malformed bodies: retry with backoff.
        case transient
    }

    package var category: Category
    package var message: String
    package var retryAfter: TimeInterval?

    package init(_ category: Category, _ message: String, retryAfter: TimeInterval? = nil) {
        self.category = category
        self.message = Redactor.shared.scrub(message)
        self.retryAfter = retryAfter
    }

    package var description: String { message }

    /// The usual mapping of an unsuccessful HTTP response.
    ///
    /// - 429 and 503, and a 403 that signals rate limiting (``HTTPResponse/signalsRateLimit``):
    ///   rate limited, waiting at least `Retry-After`.
    /// - 401 and 403: rejected credentials (`auth-failed`) only when credentials were sent; a
    ///   public source is not disabled by a 403, it fails and is retried with backoff.
    /// - Parameters:
    ///   - credentials: whether the request that got `response` carried credentials.
    ///   - detail: what the body says (providers extract their API's error fields).
    package static func http(_ response: HTTPResponse, credentials: Credentials, detail: String? = nil) -> PollError {
        let status = "HTTP \(response.status)"
        let tail = detail.map { ": \($0)" } ?? ""
        switch response.status {
        case 429, 503:
            return PollError(.rateLimited, status + tail, retryAfter: response.retryAfter)
        case 403 where response.signalsRateLimit:
            return PollError(.rateLimited, status + " (rate limited)" + tail, retryAfter: response.retryAfter)
        case 401, 403:
            // (One `case` with a `where` would guard only its last pattern.)
            guard credentials == .sent else {
                return PollError(.transient, status + " (no credentials were sent, so none were rejected)" + tail)
            }
            return PollError(.auth, status + tail)
        default:
            return PollError(.transient, status + tail, retryAfter: response.retryAfter)
        }
    }

    /// A short, printable excerpt of a response body for error messages (secrets scrubbed
    /// before it is cut, so no part of one survives the cut).
    package static func excerpt(_ body: Data, limit: Int = 200) -> String {
        Redactor.shared.excerpt(body, limit: limit)
    }
}

/// Lets a provider word the events the core derived from its items
/// (e.g. "gross 500.00 → 625.00 DKK", "resolved after 12m"). It cannot change what is new.
package protocol EventDescriber: Sendable {
    func describe(_ event: inout Event, change: ItemChange, firstSeen: Date)
}
