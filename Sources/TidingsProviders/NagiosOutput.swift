import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// What a monitoring plugin prints, read as the Monitoring Plugins development guidelines
/// lay it out:
///
///     TEXT OUTPUT | OPTIONAL PERFDATA
///     LONG TEXT LINE 1
///     LONG TEXT LINE 2 | PERFDATA LINE 2
///     PERFDATA LINE 3
///
/// The first line is the status text; the lines after it are long text until one holds a
/// `|`, after which everything is performance data. Pure: the fuzzer feeds it raw bytes.
package struct NagiosOutput: Equatable, Sendable {
    /// The first line, without its performance data.
    package var text: String
    /// Lines 2 and later, without performance data.
    package var longText: String
    package var perfdata: [PerfDatum]

    /// One `'label'=value[UOM];[warn];[crit];[min];[max]`.
    package struct PerfDatum: Equatable, Sendable {
        package var label: String
        /// nil for `U` (the plugin could not determine it).
        package var value: Double?
        package var uom: String
        /// Ranges as written (`10`, `10:20`, `@~:5`).
        package var warn: String?
        package var crit: String?
        package var min: Double?
        package var max: Double?

        package init(label: String, value: Double?, uom: String, warn: String?, crit: String?, min: Double?, max: Double?) {
            (self.label, self.value, self.uom, self.warn, self.crit, self.min, self.max) = (label, value, uom, warn, crit, min, max)
        }

        /// For an item's `data`: absent fields are left out.
        package var json: JSONValue {
            var o: [String: JSONValue] = ["label": .string(label), "value": value.map(JSONValue.number) ?? .null]
            if !uom.isEmpty { o["uom"] = .string(uom) }
            if let warn { o["warn"] = .string(warn) }
            if let crit { o["crit"] = .string(crit) }
            if let min { o["min"] = .number(min) }
            if let max { o["max"] = .number(max) }
            return .object(o)
        }
    }

    package init(parsing output: String) {
        let lines = output.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)  // "\r\n" is one Character
        let (status, firstPerf) = lines.first.map(Self.cut) ?? ("", nil)
        var perf = firstPerf.map { [$0] } ?? []
        var long: [Substring] = []
        for (i, line) in lines.enumerated().dropFirst() {
            let (before, after) = Self.cut(line)
            long.append(before)
            if let after {
                perf.append(after)
                perf += lines[(i + 1)...]
                break
            }
        }
        text = status.trimmed(newlines: false)
        longText = long.joined(separator: "\n").trimmed()
        perfdata = perf.flatMap(Self.perfdata)
    }

    /// A line split at its first `|`.
    private static func cut(_ line: Substring) -> (Substring, Substring?) {
        guard let bar = line.firstIndex(of: "|") else { return (line, nil) }
        return (line[..<bar], line[line.index(after: bar)...])
    }

    /// The data of one performance-data section; what does not parse is left out.
    static func perfdata(_ section: Substring) -> [PerfDatum] {
        tokens(section).compactMap(datum)
    }

    /// Blank-separated, but a quoted label may hold blanks (and `''` for a quote).
    private static func tokens(_ s: Substring) -> [Substring] {
        var out: [Substring] = []
        var start: Substring.Index? = nil
        var quoted = false
        var i = s.startIndex
        while i < s.endIndex {
            let c = s[i]
            if c == "'" && (start == nil || quoted || s[start!] == "'") {
                if start == nil { start = i }
                quoted.toggle()
            } else if (c == " " || c == "\t") && !quoted {
                if let b = start { out.append(s[b..<i]) }
                start = nil
            } else if start == nil {
                start = i
            }
            i = s.index(after: i)
        }
        if let b = start { out.append(s[b...]) }
        return out
    }

    private static func datum(_ token: Substring) -> PerfDatum? {
        let label: String
        let rest: Substring
        if token.first == "'" {
            // 'it''s here'=1 : the label ends at a quote that is not doubled.
            var text = ""
            var i = token.index(after: token.startIndex)
            while true {
                guard i < token.endIndex else { return nil }
                if token[i] == "'" {
                    let next = token.index(after: i)
                    if next < token.endIndex && token[next] == "'" {
                        text.append("'")
                        i = token.index(after: next)
                        continue
                    }
                    i = next
                    break
                }
                text.append(token[i])
                i = token.index(after: i)
            }
            guard i < token.endIndex, token[i] == "=" else { return nil }
            label = text
            rest = token[token.index(after: i)...]
        } else {
            guard let eq = token.firstIndex(of: "=") else { return nil }
            label = String(token[..<eq])
            rest = token[token.index(after: eq)...]
        }
        guard !label.isEmpty else { return nil }
        let fields = rest.split(separator: ";", omittingEmptySubsequences: false)
        func field(_ k: Int) -> String? { k < fields.count && !fields[k].isEmpty ? String(fields[k]) : nil }
        let (value, uom): (Double?, String)
        if fields.first == "U" {
            (value, uom) = (nil, "")
        } else {
            let valueText = fields.first ?? ""
            guard valueText.utf8.count <= 64 else { return nil }  // no plugin writes longer numbers
            let numberEnd = valueText.firstIndex { !("0"..."9" ~= $0 || $0 == "." || $0 == "-" || $0 == "+" || $0 == "e" || $0 == "E") } ?? valueText.endIndex
            // "1e" / "2.5E" are a number followed by no exponent: back off trailing e/E/+/-.
            var end = numberEnd
            while end > valueText.startIndex, Double(valueText[..<end]) == nil { end = valueText.index(before: end) }
            guard end > valueText.startIndex, let v = Double(valueText[..<end]), v.isFinite else { return nil }
            (value, uom) = (v, String(valueText[end...]))
        }
        return PerfDatum(
            label: label, value: value, uom: uom, warn: field(1), crit: field(2),
            min: field(3).flatMap { Double($0) }.flatMap { $0.isFinite ? $0 : nil },
            max: field(4).flatMap { Double($0) }.flatMap { $0.isFinite ? $0 : nil })
    }
}
