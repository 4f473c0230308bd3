/// The few string operations the sinks took from corelibs Foundation (issue 31), done on
/// Unicode scalars and UTF-8 bytes as Foundation did them: no ICU, no grapheme breaking.
/// (TidingsProviders has the same helpers, internal to it, in its Support/ScalarText.swift.)
extension StringProtocol {
    /// `trimmingCharacters(in: CharacterSet(charactersIn: scalars))`: the leading and trailing
    /// Unicode scalars that are among `scalars` removed.
    func trimming(scalarsIn scalars: String) -> String {
        let view = unicodeScalars
        let set = Set(scalars.unicodeScalars)
        guard let first = view.firstIndex(where: { !set.contains($0) }) else { return "" }
        let last = view.lastIndex(where: { !set.contains($0) })!
        var text = ""
        text.unicodeScalars.append(contentsOf: view[first...last])
        return text
    }

    /// `replacingOccurrences(of:with:)`: every occurrence of `target`, left to right and not
    /// overlapping, compared scalar by scalar: "\n" is found inside "\r\n", as Foundation finds
    /// it (the stdlib's `replacing` compares whole characters and would not). One difference:
    /// Foundation skipped a target followed by a combining mark ("_\u{301}"); this does not, so
    /// a NUL or a quote to remove or escape cannot hide behind one.
    func replacingScalars(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return String(self) }
        return String(String(self).unicodeScalars.replacing(target.unicodeScalars, with: replacement.unicodeScalars))
    }

    /// `addingPercentEncoding(withAllowedCharacters:)` for a set of ASCII characters: every
    /// UTF-8 byte for which `kept` is false (every non-ASCII one) written as `%XX`, upper-case.
    func percentEncoded(keeping kept: (UInt8) -> Bool) -> String {
        var out = ""
        for byte in utf8 {
            if byte < 0x80 && kept(byte) { out.unicodeScalars.append(Unicode.Scalar(byte)) } else { out += "%" + hexCode(UInt32(byte)) }
        }
        return out
    }

    /// `removingPercentEncoding`: each `%XX` as its byte; nil if a `%` is not followed by two
    /// hex digits or the bytes are not UTF-8.
    var percentDecoded: String? {
        let bytes = Array(utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] != UInt8(ascii: "%") {
                out.append(bytes[i])
                i += 1
                continue
            }
            guard i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) else { return nil }
            out.append(high << 4 | low)
            i += 3
        }
        return String(validating: out, as: UTF8.self)
    }
}

/// The value of one ASCII hex digit, either case.
private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// `String(format: "%02X", value)`: upper-case hex, at least two digits.
func hexCode(_ value: UInt32) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return digits.count < 2 ? "0" + digits : digits
}

/// An ASCII letter or digit.
func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
    default: false
    }
}

/// RFC 3986 `unreserved`: ASCII letters and digits and `-._~`.
func isUnreserved(_ byte: UInt8) -> Bool {
    isASCIIAlphanumeric(byte) || "-._~".utf8.contains(byte)
}
