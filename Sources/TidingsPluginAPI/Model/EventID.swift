import FoundationEssentials

/// ULID-style event ids: 48-bit millisecond time + 80 random bits, Crockford base32.
/// Sortable by creation time, unique without coordination.
package enum EventID {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)

    package static func make(at date: Date = Date()) -> String {
        var rng = SystemRandomNumberGenerator()
        return make(at: date, using: &rng)
    }

    package static func make<R: RandomNumberGenerator>(at date: Date, using rng: inout R) -> String {
        let millis = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        var chars = [UInt8](repeating: 0, count: 26)
        var t = millis
        for i in stride(from: 9, through: 0, by: -1) {
            chars[i] = alphabet[Int(t & 31)]
            t >>= 5
        }
        // 80 random bits from two draws (the system generator is a syscall per draw).
        var r = (rng.next(), rng.next())
        for i in 10..<26 {
            chars[i] = alphabet[Int(r.0 & 31)]
            r.0 >>= 5
            if i == 21 { r.0 = r.1 }  // 12 chars from the first draw (60 bits), 4 from the second
        }
        return String(decoding: chars, as: UTF8.self)
    }
}
