import TidingsPluginAPI

/// The few text edits the CLI's output needs, in the stdlib (Foundation's `padding`,
/// `trimmingCharacters(in:)` and `replacingOccurrences` belong to corelibs Foundation), each
/// with the units its Foundation counterpart used, so that the output is what it was.
package enum TextEdits {
    /// `text.padding(toLength: length, withPad: " ", startingAt: 0)`: NSString lengths are UTF-16
    /// units, so the text is padded with spaces, or cut, to `length` of them.
    package static func padded(_ text: some StringProtocol, toUTF16 length: Int) -> String {
        let units = text.utf16.count
        if units < length { return String(text) + String(repeating: " ", count: length - units) }
        return String(decoding: Array(text.utf16.prefix(length)), as: UTF16.self)
    }

    /// ``padded(_:toUTF16:)`` of a String, without the generic calls (a listing of 10,000
    /// sources pads 40,000 columns): one string, grown in place.
    package static func padded(_ text: String, toUTF16 length: Int) -> String {
        let units = text.utf16.count
        guard units < length else { return String(decoding: Array(text.utf16.prefix(length)), as: UTF16.self) }
        var out = text
        out.reserveCapacity(text.utf8.count + length - units)
        for _ in units..<length { out.append(" ") }
        return out
    }

    /// `text.trimmingCharacters(in: CharacterSet(charactersIn: scalars))`: the scalars of the set
    /// dropped at both ends.
    package static func trimming(_ text: some StringProtocol, _ scalars: Set<Unicode.Scalar>) -> String {
        text.trimmed { scalars.contains($0) }
    }

    /// `text.replacingOccurrences(of: scalar, with: replacement)` for one scalar, matched per
    /// scalar as NSString did (the "\n" of a "\r\n" too, which a Character match would miss).
    package static func replacing(_ scalar: Unicode.Scalar, with replacement: String, in text: some StringProtocol) -> String {
        text.replacingScalars(String(scalar), with: replacement)
    }

    /// `String(format: "%0*o", width, value)`: octal, zero-padded on the left to `width` digits.
    package static func octal(_ value: some BinaryInteger, width: Int) -> String {
        let digits = String(value, radix: 8)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
