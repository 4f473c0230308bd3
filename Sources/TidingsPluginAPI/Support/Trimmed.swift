extension StringProtocol {
    /// The text without leading and trailing whitespace, judged per Unicode scalar as Foundation's
    /// `trimmingCharacters(in:)` does: with `newlines`, every White_Space scalar (Foundation's
    /// `.whitespacesAndNewlines`: Z*, U+0009–U+000D, U+0085); without, only spaces (Zs) and tabs
    /// (Foundation's `.whitespaces`); U+200B ZERO WIDTH SPACE counts in both, as in Foundation.
    package func trimmed(newlines: Bool = true) -> String {
        trimmed {
            $0 == "\u{200B}" || (newlines ? $0.properties.isWhitespace : $0 == "\t" || $0.properties.generalCategory == .spaceSeparator)
        }
    }

    /// The text without the leading and trailing Unicode scalars for which `drop` holds: what
    /// Foundation's `trimmingCharacters(in: CharacterSet(charactersIn: "[]"))` does, as
    /// `trimmed { $0 == "[" || $0 == "]" }`.
    package func trimmed(where drop: (Unicode.Scalar) -> Bool) -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !drop($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !drop($0) })!
        var text = ""
        text.unicodeScalars.append(contentsOf: scalars[first...last])
        return text
    }

    /// Foundation's `trimmingCharacters(in: CharacterSet(charactersIn: scalars))`: the leading and
    /// trailing Unicode scalars that are among `scalars` removed.
    package func trimming(scalarsIn scalars: String) -> String {
        let set = Set(scalars.unicodeScalars)
        return trimmed { set.contains($0) }
    }

    /// Every occurrence of `target` replaced by `replacement`, left to right and not overlapping,
    /// compared scalar by scalar as Foundation's `replacingOccurrences(of:with:)` finds them (the
    /// stdlib's `replacing` compares whole characters: it would not find `\\` in `\\\u{301}`).
    package func replacingScalars(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return String(self) }
        var text = String(self)
        text.unicodeScalars = text.unicodeScalars.replacing(target.unicodeScalars, with: replacement.unicodeScalars)
        return text
    }

    /// Each line break scalar (Foundation's `CharacterSet.newlines`: U+000A–U+000D, U+0085,
    /// U+2028, U+2029) replaced by `replacement`, one per scalar (so `\r\n` gives two): what
    /// `components(separatedBy: .newlines).joined(separator: replacement)` gave.
    package func replacingLineBreaks(with replacement: String) -> String {
        var text = ""
        for c in unicodeScalars {
            switch c.value {
            case 0x0A...0x0D, 0x85, 0x2028, 0x2029: text += replacement
            default: text.unicodeScalars.append(c)
            }
        }
        return text
    }
}
