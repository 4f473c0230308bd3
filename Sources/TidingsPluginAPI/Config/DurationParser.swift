import FoundationEssentials

/// Parses human durations: `250ms`, `30s`, `5m`, `1h30m`, `7d`, `2w`.
package enum DurationParser {
    /// The longest duration accepted, exclusive: 3650 days (10 years). Longer ones are typos, and
    /// would overflow the clocks they are added to.
    package static let limit: TimeInterval = 10 * 365 * 86_400

    package struct Error: Swift.Error, CustomStringConvertible, Sendable {
        package var input: String
        /// The input is well-formed but not below ``DurationParser/limit``.
        package var tooLong = false
        package var description: String {
            if tooLong {
                return "invalid duration \"\(input)\": durations must be shorter than \(DurationParser.format(DurationParser.limit)) (10 years)"
            }
            return "invalid duration \"\(input)\": expected a number and a unit (ms, s, m, h, d, w) like \"30s\", \"5m\", \"1h30m\""
        }
    }

    /// Seconds for a duration string. Throws ``Error`` for anything else.
    package static func seconds(_ text: String) throws -> TimeInterval {
        let s = text.trimmed(newlines: false).lowercased()
        guard !s.isEmpty else { throw Error(input: text) }
        var total: Double = 0
        var number = ""
        var unit = ""
        var parts = 0
        func flush() throws {
            guard !number.isEmpty, let n = Double(number), n.isFinite, n >= 0 else { throw Error(input: text) }
            let factor: Double
            switch unit {
            case "ms": factor = 0.001
            case "s": factor = 1
            case "m": factor = 60
            case "h": factor = 3600
            case "d": factor = 86_400
            case "w": factor = 604_800
            default: throw Error(input: text)
            }
            total += n * factor
            parts += 1
            number = ""
            unit = ""
        }
        for ch in s {
            if ch.isNumber || ch == "." {
                if !unit.isEmpty { try flush() }
                number.append(ch)
            } else if ch.isLetter {
                guard !number.isEmpty else { throw Error(input: text) }
                unit.append(ch)
            } else {
                throw Error(input: text)
            }
        }
        try flush()
        guard parts > 0 else { throw Error(input: text) }
        guard total < limit else { throw Error(input: text, tooLong: true) }
        return total
    }

    /// Formats seconds back into the shortest readable form (`90` → `1m30s`).
    /// Total: any value formats (found by `make fuzz`: a huge `Retry-After` trapped in `Int(_:)`);
    /// beyond ±10^15 s (±31 million years, and ±∞) it is clamped, NaN is "?".
    package static func format(_ seconds: TimeInterval) -> String {
        if seconds.isNaN { return "?" }
        let seconds = min(max(seconds, -1e15), 1e15)
        if seconds < 1 { return "\(Int((seconds * 1000).rounded()))ms" }
        var rest = Int(seconds.rounded())
        var out = ""
        for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] where rest >= size {
            out += "\(rest / size)\(unit)"
            rest %= size
        }
        return out.isEmpty ? "0s" : out
    }
}
