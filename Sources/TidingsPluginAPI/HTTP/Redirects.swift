import Foundation

/// Where a request may be redirected, declared by its caller (``HTTPRequest/redirects``).
///
/// libcurl never follows redirects: ``CurlHTTPClient`` follows them itself, one hop at a time,
/// under this policy (``Redirect/next(after:to:first:hops:)``), so a credential can never reach a
/// server its caller did not name.
package enum RedirectPolicy: Sendable, Equatable {
    /// Never follow: the caller gets the 3xx response itself (a webhook sink: a redirect is a
    /// delivery failure, never a silent re-send as GET without the body).
    case never
    /// Follow only to the origin (scheme, host and port) of the first request: for requests
    /// that carry credentials. A redirect anywhere else fails, naming the target.
    case sameOrigin
    /// Follow to any http(s) URL, except from https to http: for public requests without
    /// credentials (a status page that moved to another host).
    case anyOrigin
}

/// Scheme, host and port of a URL (the scheme's default port filled in): "the same server".
package struct Origin: Sendable, Equatable, CustomStringConvertible {
    package let scheme: String
    package let host: String
    package let port: Int

    /// Nil for a URL without a host, or with a scheme other than http and https.
    package init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let defaultPort = ["http": 80, "https": 443][scheme],
            let host = url.host?.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]")), !host.isEmpty
        else { return nil }
        self.scheme = scheme
        self.host = host
        port = url.port ?? defaultPort
    }

    package var description: String { "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// A redirect the HTTP layer refused to follow; the error names where it pointed.
package struct RedirectRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Reason: Sendable, Equatable {
        /// The request carries credentials (``RedirectPolicy/sameOrigin``) and the target is another origin.
        case otherOrigin(allowed: Origin)
        /// From https to plain http.
        case downgrade
        /// To a scheme other than http and https.
        case scheme
        /// More than ``Redirect/maxHops`` redirects.
        case tooMany
        /// A `Location` that is not a URL.
        case invalidLocation
    }

    /// The redirect's status (301, 302, 303, 307, 308).
    package var status: Int
    /// Where it pointed, for messages (user info removed, length bounded).
    package var target: String
    package var reason: Reason

    package var description: String {
        let redirect = "HTTP \(status) redirect to \(target)"
        switch reason {
        case .otherOrigin(let allowed):
            return "\(redirect) refused: the request carries credentials, which go to \(allowed) only"
        case .downgrade: return "\(redirect) refused: an https request is never redirected to plain http"
        case .scheme: return "\(redirect) refused: only http and https redirects are followed"
        case .tooMany: return "\(redirect) refused: more than \(Redirect.maxHops) redirects in a row"
        case .invalidLocation: return "HTTP \(status) redirect refused: its Location is not a URL (\(target))"
        }
    }
}

/// Redirect following as the HTTP layer does it (pure: no I/O, so the rules are tested alone).
///
/// - 301, 302, 303, 307 and 308 with a `Location` are redirects; other 3xx are answers.
/// - Method and body: 303 turns anything but HEAD into a GET without a body; 301 and 302 turn
///   a POST into a GET without a body (what browsers and curl do); 307 and 308 keep both.
///   Dropping the body drops the headers that describe it (`Content-Type`, …).
/// - A hop to another origin (allowed under ``RedirectPolicy/anyOrigin`` only) drops
///   `Authorization`, `Proxy-Authorization` and `Cookie`, whatever the caller put there.
/// - At most ``maxHops`` redirects per request.
package enum Redirect {
    package static let statuses: Set<Int> = [301, 302, 303, 307, 308]
    package static let maxHops = 10

    /// Headers that describe a body, dropped with it.
    static let bodyHeaders: Set<String> = ["content-type", "content-length", "content-encoding", "content-language", "content-location", "expect"]
    /// Headers that carry credentials, never sent on to another origin.
    static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The request to send after `response` to `request`, or nil when `response` is the answer.
    /// - Parameters:
    ///   - first: the request as the caller made it (its origin and policy rule every hop).
    ///   - hops: redirects followed so far.
    /// - Throws: ``RedirectRefusal`` for a redirect the policy does not allow.
    package static func next(after response: HTTPResponse, to request: HTTPRequest, first: HTTPRequest, hops: Int) throws -> HTTPRequest? {
        guard first.redirects != .never, statuses.contains(response.status), let location = response.header("location") else { return nil }
        guard let target = URL(string: location, relativeTo: request.url)?.absoluteURL else {
            throw RedirectRefusal(status: response.status, target: display(location), reason: .invalidLocation)
        }
        func refuse(_ reason: RedirectRefusal.Reason) -> RedirectRefusal {
            RedirectRefusal(status: response.status, target: display(target), reason: reason)
        }
        guard let to = Origin(target) else { throw refuse(.scheme) }
        guard hops < maxHops else { throw refuse(.tooMany) }
        if request.url.scheme?.lowercased() == "https" && to.scheme == "http" { throw refuse(.downgrade) }
        let sameOrigin = Origin(request.url) == to
        if first.redirects == .sameOrigin, let allowed = Origin(first.url), allowed != to { throw refuse(.otherOrigin(allowed: allowed)) }

        var next = request
        next.url = target
        let method = request.method.uppercased()
        if (response.status == 303 && method != "HEAD") || ([301, 302].contains(response.status) && method == "POST") {
            next.method = "GET"
            next.body = nil
            next.headers.removeAll { bodyHeaders.contains($0.0.lowercased()) }
        }
        if !sameOrigin { next.headers.removeAll { credentialHeaders.contains($0.0.lowercased()) } }
        return next
    }

    /// A URL for messages: no user info, at most 300 characters (the server chose it).
    static func display(_ url: URL) -> String { display(ShownURL.of(url)) }

    /// A `Location` as sent, for messages: secrets scrubbed, anything else but printable ASCII
    /// percent-encoded (no terminal escapes), then at most 300 characters.
    package static func display(_ text: String) -> String {
        let safe = Redactor.shared.scrub(text).split(separator: Redactor.mask, omittingEmptySubsequences: false)
            .map { String($0).addingPercentEncoding(withAllowedCharacters: printable) ?? "" }.joined(separator: Redactor.mask)
        return Redactor.shared.shortened(safe, to: 300)
    }

    private static let printable = CharacterSet(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7E))
}
