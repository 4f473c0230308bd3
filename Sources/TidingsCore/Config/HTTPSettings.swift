import Foundation

/// `[http]` in the main file (DESIGN §8): where the daemon serves `/metrics`, `/-/healthy` and
/// `/-/ready`. Absent: no HTTP endpoint (the default).
public struct HTTPSettings: Sendable, Equatable {
    public var listen: ListenAddress

    /// Reads `[http]`; a `listen` address that is not loopback is allowed, with a warning (the
    /// endpoints have no authentication).
    package init(_ r: OptionReader, warn: (String) -> Void) throws {
        let text = try r.requiredString("listen")
        guard let address = ListenAddress(text) else {
            throw r.error("listen", "\(r.what): 'listen' must be IP:PORT, as in \"127.0.0.1:9464\" or \"[::1]:9464\", not \"\(text)\"")
        }
        listen = address
        if !address.isLoopback {
            let line = r.table["listen"]?.line.map { ":\($0)" } ?? ""
            warn("\(r.file)\(line): [http] listen = \"\(text)\" is not a loopback address: /metrics, /-/healthy and /-/ready have no authentication, so anyone who can reach it can read them (prefer 127.0.0.1 or ::1 behind a proxy)")
        }
    }
}

/// An IP literal and a TCP port: `127.0.0.1:9464`, `[::1]:9464`. No host names: what the
/// daemon binds is what the file says.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable { case ipv4, ipv6 }
    public var family: Family
    /// The address as written (without brackets), e.g. `127.0.0.1` or `::1`.
    public var host: String
    public var port: UInt16

    public init?(_ text: String) {
        let hostPart: Substring, portPart: Substring
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
    public var isLoopback: Bool {
        guard let b = Self.parse(host, family) else { return false }
        switch family {
        case .ipv4: return b[0] == 127
        case .ipv6: return b == [UInt8](repeating: 0, count: 15) + [1] || (b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xff && b[11] == 0xff && b[12] == 127)
        }
    }

    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
