/// A channel's documented length limit on one text field, and the one way text is kept within
/// it: cut on a character boundary (never inside a grapheme cluster or a UTF-8 sequence),
/// trailing whitespace dropped, and marked with "…" so a reader sees that something is missing.
package struct LengthLimit: Sendable, Equatable {
    /// What the channel counts.
    package enum Unit: Sendable, Equatable {
        /// Unicode code points (what Pushover calls "characters").
        case characters
        /// UTF-8 bytes.
        case utf8Bytes
        /// UTF-8 bytes as written inside a JSON string, escapes included: for a field whose
        /// limit is really one on the JSON body that carries it.
        case jsonBytes
    }

    package var maximum: Int
    package var unit: Unit

    package init(_ maximum: Int, _ unit: Unit) {
        precondition(maximum >= 3, "a limit must leave room for the ellipsis")
        self.maximum = maximum
        self.unit = unit
    }

    /// The mark a cut text ends with.
    package static let ellipsis: Character = "…"

    /// `text` itself if it fits, else its longest prefix of whole characters that fits with
    /// ``ellipsis`` after it.
    package func cut(_ text: String) -> String {
        guard measure(text) > maximum else { return text }
        let budget = maximum - cost(Self.ellipsis)
        var used = 0
        var end = text.startIndex
        for i in text.indices {
            let c = cost(text[i])
            guard used + c <= budget else { break }
            used += c
            end = text.index(after: i)
        }
        var kept = text[..<end]
        while kept.last?.isWhitespace == true { kept.removeLast() }
        return String(kept) + String(Self.ellipsis)
    }

    /// Whether `text` is within the limit as it is (for values that must not be cut, like URLs).
    package func fits(_ text: String) -> Bool { measure(text) <= maximum }

    /// The size of `text` in ``unit``.
    package func measure(_ text: String) -> Int {
        switch unit {
        case .characters: return text.unicodeScalars.count
        case .utf8Bytes: return text.utf8.count
        case .jsonBytes: return text.unicodeScalars.reduce(0) { $0 + Self.jsonBytes($1) }
        }
    }

    private func cost(_ c: Character) -> Int { measure(String(c)) }

    /// The bytes a scalar takes in a JSON string, as ``JSONValue/jsonString()`` writes it.
    private static func jsonBytes(_ s: Unicode.Scalar) -> Int {
        switch s.value {
        case 0x22, 0x5C, 0x08, 0x09, 0x0A, 0x0C, 0x0D: return 2  // \" \\ \b \t \n \f \r
        case 0..<0x20: return 6  // \u00XX
        default: return String(s).utf8.count
        }
    }
}
