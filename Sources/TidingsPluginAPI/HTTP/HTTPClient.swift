import Foundation

/// An HTTP request as providers and sinks describe it.
package struct HTTPRequest: Sendable {
    package var method: String
    package var url: URL
    package var headers: [(String, String)]
    package var body: Data?
    /// Whole-request deadline, seconds.
    package var timeout: TimeInterval
    /// Responses larger than this fail with ``HTTPClientError/bodyTooLarge(limit:)``.
    package var maxBody: Int
    /// Where redirects may lead. The default keeps a request on its origin, the safe choice for
    /// one that carries credentials; public requests say ``RedirectPolicy/anyOrigin``, sinks
    /// ``RedirectPolicy/never``.
    package var redirects: RedirectPolicy
    /// PEM file of the CAs to trust for https, instead of the system's (a source's `ca_file`).
    package var caFile: String?
    /// Whether a redirect may lead to a private address (a source's `refuse_private_redirects`).
    package var privateRedirects: PrivateRedirects

    package init(
        method: String = "GET", url: URL, headers: [(String, String)] = [], body: Data? = nil,
        timeout: TimeInterval = 30, maxBody: Int = 10 << 20, redirects: RedirectPolicy = .sameOrigin,
        caFile: String? = nil, privateRedirects: PrivateRedirects = .allow
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxBody = maxBody
        self.redirects = redirects
        self.caFile = caFile
        self.privateRedirects = privateRedirects
    }
}

package struct HTTPResponse: Sendable {
    package var status: Int
    /// Header names lower-cased.
    package var headers: [String: String]
    package var body: Data
    /// Where the response came from: the last hop's URL once redirects were followed (nil when
    /// the client does not say). `tidings add` resolves a page's relative links against it.
    package var url: URL? = nil

    package init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    package func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// The longest `Retry-After` honoured: a server asking for more is retried after a week.
    package static let maxRetryAfter: TimeInterval = 7 * 86_400

    /// `Retry-After` as seconds (delta-seconds or an HTTP date), within 0...``maxRetryAfter``;
    /// nil if absent or not a finite number or date (`inf`, `nan`).
    package var retryAfter: TimeInterval? {
        guard let raw = header("retry-after")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let s = Double(raw) { return s.isFinite ? min(max(0, s), Self.maxRetryAfter) : nil }
        // An HTTP date is printable ASCII. Foundation's DateFormatter traps ("Incorrect range") on
        // some other text, e.g. a combining mark ("s\u{346}\u{FFFD}s", found by `make fuzz`).
        guard raw.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else { return nil }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        if let d = f.date(from: raw) { return min(max(0, d.timeIntervalSinceNow), Self.maxRetryAfter) }
        return nil
    }

    /// A 403 that says "slow down" rather than "who are you": a `Retry-After`, a rate-limit
    /// counter at zero (`X-RateLimit-Remaining: 0`, as GitHub sends), or a body that says so.
    package var signalsRateLimit: Bool {
        if header("retry-after") != nil { return true }
        for name in ["x-ratelimit-remaining", "ratelimit-remaining", "x-rate-limit-remaining"] {
            if header(name)?.trimmingCharacters(in: .whitespaces) == "0" { return true }
        }
        let text = String(decoding: body.prefix(4096), as: UTF8.self).lowercased()
        return ["rate limit", "rate-limit", "ratelimit", "too many requests"].contains { text.contains($0) }
    }
}

package enum HTTPClientError: Error, CustomStringConvertible, Sendable {
    case timeout(TimeInterval)
    case bodyTooLarge(limit: Int)
    case transport(String)
    /// A redirect the request's ``RedirectPolicy`` does not allow (it names the target).
    case redirectRefused(RedirectRefusal)

    package var description: String {
        switch self {
        case .timeout(let t): return "timed out after \(DurationParser.format(t))"
        case .bodyTooLarge(let limit): return "response body larger than max_body (\(limit) bytes)"
        case .transport(let m): return m
        case .redirectRefused(let r): return r.description
        }
    }
}

/// The one HTTP seam. Production uses ``CurlHTTPClient``; nothing else needs to know.
package protocol HTTPClient: Sendable {
    /// Sends `request`, following redirects as its ``HTTPRequest/redirects`` allows
    /// (``Redirect/next(after:to:first:hops:)``); the response is the last hop's.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}
