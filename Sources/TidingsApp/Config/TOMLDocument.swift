import Foundation
import TOMLKit
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// Reading TOML text into ``ConfigTable``s (TOMLKit), with the line of every key.
extension ConfigTable {
    /// Parses TOML text. Syntax errors become a ``ConfigError`` with the parser's line.
    package static func parse(_ text: String, file: String) throws -> ConfigTable {
        try TOMLPrecheck.check(text, file: file)
        let toml: TOMLTable
        do {
            toml = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigError(file: file, line: error.source.begin.line, "TOML syntax: \(error.description)")
        }
        let index = TOMLLineIndex(text: text)
        return convert(toml, path: "", file: file, index: index, line: index.recordedLine(of: ""))
    }

    // Linear in the document: each value looks up its own path once, and a value whose line
    // was not recorded (an array element, a table implied by a dotted key) takes its parent's.
    // (Walking up the path per lookup was cubic in the depth: a 16 KB dotted key took minutes.)
    package static func convert(_ t: TOMLTable, path: String, file: String, index: TOMLLineIndex, line: Int?) -> ConfigTable {
        var keyed: [(line: Int?, key: String)] = []
        var entries: [String: ConfigNode] = [:]
        for (key, value) in t {
            let node = convert(value, path: join(path, key), file: file, index: index, parentLine: line)
            keyed.append((node.line, key))
            entries[key] = node
        }
        // toml++ iterates in sorted order; present keys in file order for readable errors.
        keyed.sort { ($0.line ?? Int.max, $0.key) < ($1.line ?? Int.max, $1.key) }
        return ConfigTable(file: file, path: path, line: line, keys: keyed.map(\.key), entries: entries)
    }

    package static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    package static func convert(_ v: TOMLValueConvertible, path: String, file: String, index: TOMLLineIndex, parentLine: Int?) -> ConfigNode {
        let line = index.recordedLine(of: path) ?? parentLine
        switch v.type {
        case .string: return ConfigNode(value: .string(v.string ?? ""), line: line)
        case .int: return ConfigNode(value: .int(v.int ?? 0), line: line)
        case .double: return ConfigNode(value: .double(v.double ?? 0), line: line)
        case .bool: return ConfigNode(value: .bool(v.bool ?? false), line: line)
        case .table:
            return ConfigNode(value: .table(convert(v.table!, path: path, file: file, index: index, line: line)), line: line)
        case .array:
            let arr = v.array!
            var nodes: [ConfigNode] = []
            for (i, element) in arr.enumerated() {
                nodes.append(convert(element, path: "\(path)[\(i)]", file: file, index: index, parentLine: line))
            }
            return ConfigNode(value: .array(nodes), line: line)
        case .date, .time, .dateTime:
            return ConfigNode(value: .other("a date/time"), line: line)
        }
    }
}

/// Maps dotted key paths to the line they are written on, by reading TOML text.
///
/// Handles `[table]`, `[[array.of.tables]]` (paths get `[n]`), dotted and quoted keys,
/// inline tables on one line, and skips multi-line strings. Good enough to point at the
/// line; the parser itself stays TOMLKit.
package struct TOMLLineIndex {
    private var lines: [String: Int] = [:]

    package init(text: String) {
        var current = ""
        var arrayCounts: [String: Int] = [:]
        var inMultiline: String? = nil
        for (n, raw) in Self.lines(text).enumerated() {
            let lineNo = n + 1
            var line = Self.trimmed(raw)
            if let delim = inMultiline {
                if line.components(separatedBy: delim).count % 2 == 0 { inMultiline = nil }
                continue
            }
            if line.hasPrefix("#") || line.isEmpty { continue }
            if line.hasPrefix("[[") {
                let name = Self.keyPath(String(line.dropFirst(2).prefix { $0 != "]" }))
                let i = arrayCounts[name, default: 0]
                arrayCounts[name] = i + 1
                current = "\(name)[\(i)]"
                record(current, lineNo)
                continue
            }
            if line.hasPrefix("[") {
                current = Self.keyPath(String(line.dropFirst().prefix { $0 != "]" }))
                record(current, lineNo)
                continue
            }
            guard let eq = Self.assignmentIndex(line) else { continue }
            let key = Self.keyPath(String(line[..<eq]))
            let full = current.isEmpty ? key : "\(current).\(key)"
            record(full, lineNo)
            line = Self.trimmed(line[line.index(after: eq)...])
            for delim in ["\"\"\"", "'''"] where line.hasPrefix(delim) {
                if line.components(separatedBy: delim).count == 2 { inMultiline = delim }
            }
            if line.hasPrefix("{") { recordInline(line, prefix: full, lineNo) }
        }
    }

    /// The line `path` itself was written on, if it was (array elements and tables implied by
    /// dotted keys were not; ``ConfigTable/convert(_:path:file:index:line:)`` gives them their parent's).
    package func recordedLine(of path: String) -> Int? { lines[path] }

    /// `text` split at "\n" as Characters split it ("\r\n" is one Character, not a break):
    /// on the bytes when the text is ASCII without "\r", where both agree.
    static func lines(_ text: String) -> [Substring] {
        if text.utf8.allSatisfy({ $0 < 0x80 && $0 != 0x0D }) {
            var out: [Substring] = []
            var start = text.startIndex
            for i in text.utf8.indices where text.utf8[i] == 0x0A {
                out.append(text[start..<i])
                start = text.utf8.index(after: i)
            }
            out.append(text[start...])
            return out
        }
        return text.split(separator: "\n", omittingEmptySubsequences: false)
    }

    private mutating func record(_ path: String, _ line: Int) {
        if lines[path] == nil { lines[path] = line }
    }

    private mutating func recordInline(_ text: String, prefix: String, _ line: Int) {
        // `{ a = 1, b = { c = 2 } }`: record each key at this line.
        var depth = 0
        var stack: [String] = [prefix]
        var token = ""
        var inString: Character? = nil
        var pendingKey: String? = nil
        for ch in text {
            if let q = inString {
                if ch == q { inString = nil }
                continue
            }
            switch ch {
            case "\"", "'": inString = ch
            case "{":
                depth += 1
                if let k = pendingKey {
                    stack.append(k)
                    pendingKey = nil
                }
                token = ""
            case "}":
                depth -= 1
                if stack.count > 1 { stack.removeLast() }
                token = ""
            case "=":
                let key = Self.keyPath(token)
                let full = "\(stack.last!).\(key)"
                record(full, line)
                pendingKey = full
                token = ""
            case ",":
                token = ""
                pendingKey = nil
            default:
                token.append(ch)
            }
        }
    }

    /// Index of the `=` that separates key and value, ignoring `=` in quoted keys.
    private static func assignmentIndex(_ line: String) -> String.Index? {
        // ASCII only (most lines): one Character per byte, so the bytes decide alike, faster.
        if line.utf8.allSatisfy({ $0 < 0x80 }) {
            var quote: UInt8? = nil
            for i in line.utf8.indices {
                let b = line.utf8[i]
                if let q = quote {
                    if b == q { quote = nil }
                } else if b == UInt8(ascii: "\"") || b == UInt8(ascii: "'") {
                    quote = b
                } else if b == UInt8(ascii: "=") {
                    return i
                }
            }
            return nil
        }
        var quote: Character? = nil
        var i = line.startIndex
        while i < line.endIndex {
            let ch = line[i]
            if let q = quote {
                if ch == q { quote = nil }
            } else if ch == "\"" || ch == "'" {
                quote = ch
            } else if ch == "=" {
                return i
            }
            i = line.index(after: i)
        }
        return nil
    }

    /// `a . "b.c" .d` → `a.b.c.d` (quotes dropped; matches TOMLKit's keys joined by dots).
    package static func keyPath(_ raw: String) -> String {
        // No quote and no dot (most keys): one part, the trimmed key.
        if !raw.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "'") }) {
            return trimmed(raw[...])
        }
        var parts: [String] = []
        var cur = ""
        var quote: Character? = nil
        for ch in raw {
            if let q = quote {
                if ch == q { quote = nil } else { cur.append(ch) }
            } else if ch == "\"" || ch == "'" {
                quote = ch
            } else if ch == "." {
                parts.append(trimmed(cur[...]))
                cur = ""
            } else {
                cur.append(ch)
            }
        }
        parts.append(trimmed(cur[...]))
        return parts.joined(separator: ".")
    }

    /// Leading and trailing blanks (not newlines) removed, in pure Swift: Foundation's
    /// `trimmingCharacters(in:)` bridges through NSString and dominated loading 10,000 plugin files.
    package static func trimmed(_ s: Substring) -> String {
        // Fast path on the bytes: spaces and tabs off both ends; if a non-ASCII byte is then at
        // an end (a Unicode blank, a combining mark), the Characters decide below.
        let u = s.utf8
        var lo = u.startIndex
        var hi = u.endIndex
        while lo < hi, u[lo] == 0x20 || u[lo] == 0x09 { lo = u.index(after: lo) }
        while lo < hi {
            let last = u.index(before: hi)
            guard u[last] == 0x20 || u[last] == 0x09 else { break }
            hi = last
        }
        if lo == hi { return "" }
        if u[lo] < 0x80, u[u.index(before: hi)] < 0x80 { return String(s[lo..<hi]) }
        func blank(_ c: Character) -> Bool { c == " " || c == "\t" || (c.isWhitespace && !c.isNewline) }
        guard let first = s.firstIndex(where: { !blank($0) }) else { return "" }
        let last = s.lastIndex(where: { !blank($0) })!
        return String(s[first...last])
    }
}
