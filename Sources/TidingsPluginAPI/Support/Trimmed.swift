extension StringProtocol {
    /// The text without leading and trailing whitespace, judged per Unicode scalar as Foundation's
    /// `trimmingCharacters(in:)` does: with `newlines`, every White_Space scalar (Foundation's
    /// `.whitespacesAndNewlines`: Z*, U+0009–U+000D, U+0085); without, only spaces (Zs) and tabs
    /// (Foundation's `.whitespaces`); U+200B ZERO WIDTH SPACE counts in both, as in Foundation.
    package func trimmed(newlines: Bool = true) -> String {
        let scalars = unicodeScalars
        func blank(_ c: Unicode.Scalar) -> Bool {
            c == "\u{200B}" || (newlines ? c.properties.isWhitespace : c == "\t" || c.properties.generalCategory == .spaceSeparator)
        }
        guard let first = scalars.firstIndex(where: { !blank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !blank($0) })!
        var text = ""
        text.unicodeScalars.append(contentsOf: scalars[first...last])
        return text
    }
}
