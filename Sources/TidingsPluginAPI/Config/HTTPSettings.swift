import Foundation

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

    /// Reads `[http]`. A `listen` address that is not loopback needs `[http.auth]` (DESIGN §13:
    /// without it the daemon refuses to start): the page can change the state, and `/metrics`
    /// names every source and sink.
    package init(_ r: OptionReader, warn: (String) -> Void) throws {
        // Known even when an error below stops the reading (no "unknown key" after a bad listen).
        r.markConsumed("status_page", "auth")
        let text = try r.requiredString("listen")
        guard let address = ListenAddress(text) else {
            throw r.error("listen", "\(r.what): 'listen' must be IP:PORT, as in \"127.0.0.1:9464\" or \"[::1]:9464\", not \"\(text)\"")
        }
        listen = address
        statusPage = try r.bool("status_page") ?? true
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
}
