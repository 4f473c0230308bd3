import FoundationEssentials
import Glibc

/// `[http]` in the main file (DESIGN §8, §13): where the daemon serves `/metrics`, `/-/healthy`,
/// `/-/ready` and the status page on `/` (unless `status_page = false`). Absent: no HTTP
/// endpoint (the default).
package struct HTTPSettings: Sendable, Equatable {
    package var listen: ListenAddress
    /// The status page (overview, sources, history, outbox, silences, notices) on `/`: on with
    /// `[http]` (DESIGN §13); `status_page = false` leaves `/` a 404.
    package var statusPage: Bool
    /// `[http.auth]`: required on a non-loopback `listen`; when set it guards the status page and
    /// `/metrics` (never `/-/healthy` and `/-/ready`, for probes).
    package var auth: HTTPAuth?
    /// `allowed_hosts`: further names (or addresses) the endpoint answers for besides its own
    /// address and `localhost`, e.g. a reverse proxy's `status.example.org`. Lower case, an IPv6
    /// address in brackets, with `:PORT` only where the entry gives one (``HostName``).
    package var allowedHosts: [HostName] = []

    /// Reads `[http]`. A `listen` address that is not loopback needs `[http.auth]` (DESIGN §13:
    /// without it the daemon refuses to start): the page can change the state, and `/metrics`
    /// names every source and sink.
    package init(_ r: OptionReader, warn: (String) -> Void) throws {
        // Known even when an error below stops the reading (no "unknown key" after a bad listen).
        r.markConsumed("status_page", "auth", "allowed_hosts")
        let text = try r.requiredString("listen")
        guard let address = ListenAddress(text) else {
            throw r.error("listen", "\(r.what): 'listen' must be IP:PORT, as in \"127.0.0.1:9464\" or \"[::1]:9464\", not \"\(text)\"")
        }
        listen = address
        statusPage = try r.bool("status_page") ?? true
        for entry in try r.stringList("allowed_hosts") ?? [] {
            guard let name = HostName(entry) else {
                throw r.error(
                    "allowed_hosts",
                    "\(r.what): 'allowed_hosts' takes host names or addresses as clients send them in Host (\"status.example.org\", \"192.0.2.7\", \"[2001:db8::7]\", optionally with :PORT), not \"\(entry)\"")
            }
            allowedHosts.append(name)
        }
        if address.isWildcard && allowedHosts.isEmpty {
            warn(
                r.error(
                    "listen",
                    "[http] listen = \"\(text)\" answers only requests for \(address.description) and localhost: add the names and addresses clients use to reach it to [http] allowed_hosts (others get 421 Misdirected Request)"
                ).description)
        }
        if let a = try r.subtable("auth") {
            // Both what is wrong with the credentials and any unknown key in the table.
            var errors: [ConfigError] = []
            do { auth = try HTTPAuth(a) } catch let e as ConfigError { errors.append(e) }
            do { try a.finish() } catch let e as ConfigError { errors.append(e) } catch let e as ConfigErrors { errors += e.errors }
            if !errors.isEmpty { throw ConfigErrors(errors) }
        }
        if !address.isLoopback && auth == nil {
            throw r.error(
                "listen",
                "[http] listen = \"\(text)\" is not a loopback address: off loopback the endpoint needs [http.auth] (user and password, or token), since the status page can change the state and /metrics names every source; or listen on 127.0.0.1 or ::1 behind a proxy"
            )
        }
    }
}

/// `[http.auth]`: HTTP Basic (`user` and a `password` secret) or a Bearer `token` secret, one of
/// the two. The secrets are read as any secret option (`password_file`, `_env`, `_credential`,
/// or inline in a file only its owner can read).
package enum HTTPAuth: Sendable, Equatable {
    case basic(user: String, password: Secret)
    case bearer(token: Secret)

    package init(_ r: OptionReader) throws {
        let user = try r.string("user")
        let password = try r.secret("password", required: false)
        let token = try r.secret("token", required: false)
        switch (user, password, token) {
        case (let user?, let password?, nil):
            guard !user.isEmpty, !user.contains(":") else { throw r.error("user", "\(r.what): 'user' must be a non-empty name without ':'") }
            self = .basic(user: user, password: password)
        case (nil, nil, let token?):
            self = .bearer(token: token)
        case (_, _, _?):
            throw r.error(nil, "\(r.what): give 'user' and 'password' (Basic), or 'token' (Bearer), not both")
        default:
            throw r.error(
                nil,
                "\(r.what): give 'user' and 'password' (Basic, password as password_file, password_env or password_credential), or 'token' (Bearer, likewise)")
        }
    }

    package static func == (a: HTTPAuth, b: HTTPAuth) -> Bool {
        switch (a, b) {
        case (.basic(let u1, let p1), .basic(let u2, let p2)): return u1 == u2 && p1.value == p2.value
        case (.bearer(let t1), .bearer(let t2)): return t1.value == t2.value
        default: return false
        }
    }
}

/// An IP literal and a TCP port: `127.0.0.1:9464`, `[::1]:9464`. No host names: what the
/// daemon binds is what the file says.
package struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    package enum Family: Sendable, Hashable { case ipv4, ipv6 }
    package var family: Family
    /// The address as written (without brackets), e.g. `127.0.0.1` or `::1`.
    package var host: String
    package var port: UInt16

    package init?(_ text: String) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
            family = .ipv6
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            family = .ipv4
        }
        guard portPart.allSatisfy(\.isASCII), let port = UInt16(portPart), port > 0 else { return nil }
        host = String(hostPart)
        self.port = port
        guard Self.parse(host, family) != nil else { return nil }
    }

    /// The 4 or 16 address bytes, if `host` is a literal of `family`.
    private static func parse(_ host: String, _ family: Family) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: family == .ipv4 ? 4 : 16)
        let ok = bytes.withUnsafeMutableBytes { inet_pton(family == .ipv4 ? AF_INET : AF_INET6, host, $0.baseAddress) }
        return ok == 1 ? bytes : nil
    }

    /// 127.0.0.0/8 or ::1 (also ::ffff:127.x.y.z).
    package var isLoopback: Bool {
        guard let b = Self.parse(host, family) else { return false }
        switch family {
        case .ipv4: return b[0] == 127
        case .ipv6: return b == [UInt8](repeating: 0, count: 15) + [1] || (b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xff && b[11] == 0xff && b[12] == 127)
        }
    }

    package var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// 0.0.0.0 or :: (every address of the machine).
    package var isWildcard: Bool { Self.parse(host, family)?.allSatisfy { $0 == 0 } ?? false }

    /// The address as a `Host` header names it: `127.0.0.1`, `[::1]`.
    package var hostName: String { family == .ipv6 ? "[\(host.lowercased())]" : host }
}

/// A host as a `Host` header or an origin names it: a DNS name or an IPv4 address in lower
/// case, or an IPv6 address in brackets, and a port if one was given. `init` takes exactly
/// that syntax (`status.example.org`, `localhost:9464`, `[::1]:9464`), nothing else: no
/// scheme, path, user or space.
package struct HostName: Sendable, Hashable, CustomStringConvertible {
    package var name: String
    package var port: UInt16?

    package init(name: String, port: UInt16?) {
        self.name = name.lowercased()
        self.port = port
    }

    package init?(_ text: some StringProtocol) {
        let text = String(text)
        var name = Substring(text)
        var port: UInt16?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[...close]
            let inner = text[text.index(after: text.startIndex)..<close]
            guard !inner.isEmpty, inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Self.port(rest.dropFirst()) else { return nil }
                port = p
            }
        } else {
            if let colon = text.firstIndex(of: ":") {
                guard let p = Self.port(text[text.index(after: colon)...]) else { return nil }
                name = text[..<colon]
                port = p
            }
            // Letters, digits, '-' and '.' (a DNS name or an IPv4 address); no empty label.
            guard !name.isEmpty, name.utf8.count <= 253,
                name.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." }),
                !name.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty)
            else { return nil }
        }
        self.init(name: String(name), port: port)
    }

    private static func port(_ s: Substring) -> UInt16? {
        guard !s.isEmpty, s.utf8.count <= 5, s.allSatisfy({ $0.isASCII && $0.isNumber }), let p = UInt16(s), p > 0 else { return nil }
        return p
    }

    package var description: String { port.map { "\(name):\($0)" } ?? name }
}
