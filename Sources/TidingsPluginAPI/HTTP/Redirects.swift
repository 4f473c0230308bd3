import FoundationEssentials
#if canImport(Glibc)
    import Glibc
#endif

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

/// Whether a redirect may lead to a private address (a source's `refuse_private_redirects`):
/// a public server that is taken over must not turn tidings into a client of the machines
/// behind it. Checked on the address each redirected hop actually connects to, never on a name.
package enum PrivateRedirects: Sendable, Hashable {
    /// Unset: refused when the request's first hop (the configured URL) connected to a public
    /// address; a source on a private or loopback server may redirect within its network.
    case auto
    /// `true`: a redirect to a private address is always refused.
    case refuse
    /// `false`: never checked.
    case allow
}

/// Addresses that are not on the public internet (``PrivateRedirects``), decided on the bytes.
package enum PrivateAddress {
    /// True for loopback, "this network" (0/8), RFC 1918, CGNAT (100.64/10), link-local,
    /// IETF-reserved (192.0.0/24), benchmarking (198.18/15), multicast, reserved and broadcast
    /// IPv4; and IPv6 unspecified, loopback, ULA (fc00::/7), link- and site-local, multicast,
    /// and the IPv4 address inside an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 one.
    /// `bytes` is 4 (IPv4) or 16 (IPv6) bytes; anything else is private (refused).
    package static func isPrivate(_ bytes: [UInt8]) -> Bool {
        if bytes.count == 4 {
            let (a, b) = (bytes[0], bytes[1])
            return a == 0 || a == 10 || a == 127 || a >= 224
                || (a == 100 && b & 0xC0 == 64) || (a == 169 && b == 254) || (a == 172 && b & 0xF0 == 16)
                || (a == 192 && b == 168) || (a == 192 && b == 0 && bytes[2] == 0) || (a == 198 && (b == 18 || b == 19))
        }
        guard bytes.count == 16 else { return true }
        let head = bytes[0..<10]
        if head.allSatisfy({ $0 == 0 }) {
            // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible, deprecated), :: and ::1.
            if bytes[10] == 0xFF && bytes[11] == 0xFF || bytes[10] == 0 && bytes[11] == 0 { return isPrivate(Array(bytes[12..<16])) }
        }
        // 64:ff9b::a.b.c.d (NAT64) and 2002:a.b.c.d:: (6to4) reach the IPv4 address inside.
        if bytes[0..<12] == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return isPrivate(Array(bytes[12..<16])) }
        if bytes[0] == 0x20 && bytes[1] == 0x02 { return isPrivate(Array(bytes[2..<6])) }
        return bytes[0] & 0xFE == 0xFC || (bytes[0] == 0xFE && bytes[1] & 0x80 == 0x80) || bytes[0] == 0xFF
    }

    /// An address as text (`10.0.0.1`, `::ffff:127.0.0.1`); nil when it is not one.
    package static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

/// Scheme, host and port of a URL (the scheme's default port filled in): "the same server".
package struct Origin: Sendable, Equatable, CustomStringConvertible {
    package let scheme: String
    package let host: String
    package let port: Int

    /// Nil for a URL without a host, or with a scheme other than http and https.
    package init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased(), let defaultPort = ["http": 80, "https": 443][scheme],
            let host = url.host?.lowercased().trimmed(where: { $0 == "[" || $0 == "]" }), !host.isEmpty
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
        /// The target's address (the one connected to) is private (``PrivateRedirects``).
        case privateAddress(String)
    }

    /// The redirect's status (301, 302, 303, 307, 308).
    package var status: Int
    /// Where it pointed, for messages (user info removed, length bounded).
    package var target: String
    package var reason: Reason

    package init(status: Int, target: String, reason: Reason) {
        self.status = status
        self.target = target
        self.reason = reason
    }

    package var description: String {
        let redirect = "HTTP \(status) redirect to \(target)"
        switch reason {
        case .otherOrigin(let allowed):
            return "\(redirect) refused: the request carries credentials, which go to \(allowed) only"
        case .downgrade: return "\(redirect) refused: an https request is never redirected to plain http"
        case .scheme: return "\(redirect) refused: only http and https redirects are followed"
        case .tooMany: return "\(redirect) refused: more than \(Redirect.maxHops) redirects in a row"
        case .invalidLocation: return "HTTP \(status) redirect refused: its Location is not a URL (\(target))"
        case .privateAddress(let address):
            return "\(redirect) refused: it leads to the private address \(address) (refuse_private_redirects)"
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
    package static func display(_ url: URL) -> String { display(ShownURL.of(url)) }

    /// A `Location` as sent, for messages: secrets scrubbed, anything else but printable ASCII
    /// percent-encoded (no terminal escapes), then at most 300 characters.
    package static func display(_ text: String) -> String {
        let safe = Redactor.shared.scrub(text).split(separator: Redactor.mask, omittingEmptySubsequences: false)
            .map { $0.percentEncoded { (0x21...0x7E).contains($0) } }.joined(separator: Redactor.mask)
        return Redactor.shared.shortened(safe, to: 300)
    }
}
