import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// Hosts whose traffic never leaves the machine: `localhost` and `*.localhost` (RFC 6761),
/// 127.0.0.0/8, `::1` and `::ffff:127.x.x.x`. Where plain http or smtp is allowed despite carrying
/// a secret. An address must parse as one: `127.example.com` is a name like any other.
package enum Loopback {
    package static func contains(host raw: String) -> Bool {
        let host = raw.lowercased().trimmed { $0 == "[" || $0 == "]" }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        // IPv4-mapped: ::ffff:a.b.c.d
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }

    package static func contains(_ url: URL) -> Bool {
        url.host.map { contains(host: $0) } ?? false
    }
}
