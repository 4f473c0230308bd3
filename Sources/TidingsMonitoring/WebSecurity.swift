import FoundationEssentials
import Synchronization
import TidingsCrypto
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI

/// The status page's guards (DESIGN §13, docs/status-page.md "Security model"), without sockets:
/// authentication, the CSRF token, the same-origin check and the response headers.
package struct WebSecurity: Sendable {
    /// A random key per daemon process: tokens of a previous daemon are refused. Drawn at the
    /// first token (libcrypto is loaded then, not when the daemon starts: DESIGN §15).
    private let keyHolder: Key
    private var key: [UInt8] { keyHolder.bytes }
    /// How long a CSRF token is good for (a page left open longer asks to reload).
    package static let tokenLifetime: TimeInterval = 12 * 3600

    /// A key drawn at its first use.
    package init() { keyHolder = Key(nil) }
    package init(key: [UInt8]) { keyHolder = Key(key) }

    /// The key, drawn once (OpenSSL's RAND_bytes) by whichever request needs it first.
    private final class Key: Sendable {
        private let drawn: Mutex<[UInt8]?>
        init(_ given: [UInt8]?) { drawn = Mutex(given) }
        var bytes: [UInt8] {
            drawn.withLock { key in
                if let key { return key }
                let new = secureRandomBytes(32)
                key = new
                return new
            }
        }
    }

    // MARK: CSRF (synchronizer token, stateless)

    /// `ISSUED.MAC`: the issue time (Unix seconds) and HMAC-SHA256(key, "tidings-csrf:" + ISSUED),
    /// hex. Put in every form; a POST must send it back in the `csrf` field.
    package func csrfToken(now: Date) -> String {
        let issued = String(Int(now.timeIntervalSince1970))
        let mac = HMACSHA256.authenticationCode(for: "tidings-csrf:\(issued)".utf8, key: key)
        return issued + "." + hexString(mac)
    }

    /// Whether `token` was made by ``csrfToken(now:)`` of this process within ``tokenLifetime``.
    package func validCSRF(_ token: String?, now: Date) -> Bool {
        guard let token, token.utf8.count <= 100 else { return false }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let issued = Int(parts[0]), let mac = Self.unhex(parts[1]) else { return false }
        let age = now.timeIntervalSince1970 - Double(issued)
        guard age >= -60, age <= Self.tokenLifetime else { return false }
        return HMACSHA256.isValid(mac, for: "tidings-csrf:\(parts[0])".utf8, key: key)
    }

    // MARK: Origin

    /// A change must come from a page of this server: its `Origin` (or, without one, its
    /// `Referer`) names a host the listener is for (``HostPolicy``, with the exact port for its
    /// own address and `localhost`). Neither: refused; an opaque `Origin: null` (a sandboxed
    /// frame, a `data:` page) too, whatever its `Referer` says.
    package static func sameOrigin(origin: String?, referer: String?, hosts: HostPolicy) -> Bool {
        let claimed: String
        if let origin {
            guard origin != "null" else { return false }
            claimed = origin
        } else if let referer {
            claimed = referer
        } else {
            return false
        }
        guard let url = URL(string: claimed), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let h = url.host?.lowercased(), !h.isEmpty
        else { return false }
        let name = h.contains(":") && !h.hasPrefix("[") ? "[\(h)]" : h
        // Without a port, the scheme's default.
        guard let port = UInt16(exactly: url.port ?? (scheme == "https" ? 443 : 80)) else { return false }
        return hosts.allows(HostName(name: name, port: port), exactPort: true)
    }

    // MARK: Authentication

    /// Whether the `Authorization` header satisfies `auth` (nil: nothing to satisfy). Compared
    /// as SHA-256 digests, in constant time. An empty secret (refused at load; a placeholder
    /// of a command that reads secrets leniently) authenticates nobody.
    package static func authorized(_ header: String?, _ auth: HTTPAuth?) -> Bool {
        guard let auth else { return true }
        guard let header, header.utf8.count <= 4096 else { return false }
        let expected: String
        switch auth {
        case .basic(let user, let password):
            guard !password.value.isEmpty else { return false }
            expected = "Basic " + Data("\(user):\(password.value)".utf8).base64EncodedString()
        case .bearer(let token):
            guard !token.value.isEmpty else { return false }
            expected = "Bearer " + token.value
        }
        // The scheme is case-insensitive; the credentials are not.
        guard let space = header.firstIndex(of: " "), let eSpace = expected.firstIndex(of: " "),
            header[..<space].lowercased() == expected[..<eSpace].lowercased()
        else { return false }
        let given = SHA256.hash(header[header.index(after: space)...].trimmed(newlines: false).utf8)
        let wanted = SHA256.hash(expected[expected.index(after: eSpace)...].utf8)
        return constantTimeEqual(given, wanted)
    }

    /// The `WWW-Authenticate` of a 401.
    package static func challenge(_ auth: HTTPAuth) -> String {
        switch auth {
        case .basic: return "Basic realm=\"tidings\", charset=\"UTF-8\""
        case .bearer: return "Bearer realm=\"tidings\""
        }
    }

    // MARK: Headers

    /// On every status page response: no script or style but this server's files, no framing,
    /// no sniffing, no referrer to another site, no caching of pages that show the state.
    package static let headers: [String: String] = [
        "Content-Security-Policy":
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-store",
    ]

    private static func unhex(_ s: Substring) -> Data? {
        guard s.utf8.count == 64 else { return nil }
        var out = Data(capacity: 32)
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            guard let b = UInt8(s[i..<j], radix: 16) else { return nil }
            out.append(b)
            i = j
        }
        return out
    }
}

/// The hosts a listener is for (DNS rebinding, DESIGN §13): a page whose name an attacker
/// re-binds to 127.0.0.1 still sends that name as `Host`, so only these are answered: the
/// listen address and `localhost` (with the listen port or none; on a wildcard address such as
/// 0.0.0.0 also 127.0.0.1 and [::1]), and the `allowed_hosts` of `[http]` (with any port,
/// unless the entry gives one).
package struct HostPolicy: Sendable {
    package var listen: ListenAddress
    package var allowed: [HostName]

    package init(listen: ListenAddress, allowed: [HostName]) {
        self.listen = listen
        self.allowed = allowed
    }

    /// The names the listener has of its own.
    private var own: [String] {
        [listen.hostName, "localhost"] + (listen.isWildcard ? ["127.0.0.1", "[::1]"] : [])
    }

    /// Whether a request's `Host` header names this listener.
    package func allowsHost(_ header: String?) -> Bool {
        guard let header, let host = HostName(header) else { return false }
        return allows(host, exactPort: false)
    }

    /// Whether `host` is one of this listener's. `exactPort`: an origin's port (always known)
    /// must be the listen port for the listener's own names; a `Host` may leave it out.
    package func allows(_ host: HostName, exactPort: Bool) -> Bool {
        if own.contains(host.name), host.port == listen.port || (!exactPort && host.port == nil) { return true }
        return allowed.contains { $0.name == host.name && ($0.port == nil || $0.port == host.port) }
    }

    /// The answer to a request for another host.
    package var misdirected: MonitoringResponse {
        let names = own.map { "\($0):\(listen.port)" } + allowed.map(\.description)
        var r = MonitoringResponse.text(
            421,
            "misdirected request: this endpoint answers only requests whose Host is one of \(names.joined(separator: ", ")); to reach it by another name (a reverse proxy's), add that name to allowed_hosts in [http]"
        )
        r.headers = WebSecurity.headers
        return r
    }
}

/// `application/x-www-form-urlencoded` and query strings.
package enum FormDecoding {
    /// The fields of `text` (`a=1&b=x+y`); a repeated name keeps its first value.
    package static func fields(_ text: Substring) -> [String: String] {
        var out: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(kv[0])
            let value = kv.count > 1 ? decode(kv[1]) : ""
            if out[name] == nil { out[name] = value }
        }
        return out
    }

    private static func decode(_ s: Substring) -> String {
        let plus = s.replacingScalars("+", with: " ")
        return plus.percentDecoded ?? plus
    }
}
