extension StringProtocol {
    /// Foundation's `addingPercentEncoding(withAllowedCharacters:)` for a set of ASCII
    /// characters: each UTF-8 byte kept if it is ASCII and `kept` holds for it, else written as
    /// `%XX` (upper-case hex). Non-ASCII bytes are always encoded, as Foundation does.
    package func percentEncoded(keeping kept: (UInt8) -> Bool) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        for byte in utf8 {
            if byte < 0x80 && kept(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Foundation's `removingPercentEncoding`: each `%XX` (either case) decoded; nil if a `%` is
    /// not followed by two hex digits or the bytes are not UTF-8. `+` stays `+`.
    package var percentDecoded: String? {
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var bytes = utf8.makeIterator()
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                continue
            }
            guard let high = bytes.next().flatMap(hexValue), let low = bytes.next().flatMap(hexValue) else { return nil }
            out.append(high << 4 | low)
        }
        return String(validating: out, as: UTF8.self)
    }
}

/// RFC 3986 `unreserved`: ASCII letters and digits and `-._~`.
package func isUnreservedURLByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
    case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
    default: false
    }
}

/// `String(format: "%02X", value)`: upper-case hex, at least two digits.
package func hexCode(_ value: UInt32) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return digits.count < 2 ? "0" + digits : digits
}

/// An ASCII letter or digit.
package func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
    default: false
    }
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}
