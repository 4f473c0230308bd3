import CTOML
import FoundationEssentials
import Glibc
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
        // TOMLKit parses (toml++), but its way of reading a document leaks: no TOMLTable frees
        // its toml++ tree, and every key list, string, integer, float and boolean it returns is
        // a malloc'd copy nobody frees (1.3 KB per plugin file in all, for the life of the
        // process and again on every reload: 13 MB for 10,000 sources, heaptrack). So the tree
        // is read here through TOMLKit's C layer, each copy freed once read, and the tree is
        // freed below its root (`clear()`) once converted; only the root's 96 bytes stay.
        defer { toml.clear() }
        guard let root = Mirror(reflecting: toml).children.first(where: { $0.label == "tablePointer" })?.value as? OpaquePointer else {
            fatalError("TOMLKit's TOMLTable has no tablePointer: the TOMLKit version changed")
        }
        return convert(table: root, path: "", file: file, index: index, line: index.recordedLine(of: ""))
    }

    // Linear in the document: each value looks up its own path once, and a value whose line
    // was not recorded (an array element, a table implied by a dotted key) takes its parent's.
    // (Walking up the path per lookup was cubic in the depth: a 16 KB dotted key took minutes.)
    static func convert(table t: OpaquePointer, path: String, file: String, index: TOMLLineIndex, line: Int?) -> ConfigTable {
        var keyed: [(line: Int?, key: String)] = []
        var entries: [String: ConfigNode] = [:]
        let count = tableSize(t)
        let keys = tableGetKeys(t)
        defer {
            for i in 0..<count { free(UnsafeMutablePointer(mutating: keys[i])) }
            free(UnsafeMutableRawPointer(mutating: keys))
        }
        for i in 0..<count {
            let key = String(cString: keys[i])
            guard let value = tableGetNode(t, keys[i]) else { continue }
            let node = convert(node: value, path: join(path, key), file: file, index: index, parentLine: line)
            keyed.append((node.line, key))
            entries[key] = node
        }
        // toml++ iterates in sorted order; present keys in file order for readable errors.
        keyed.sort { ($0.line ?? Int.max, $0.key) < ($1.line ?? Int.max, $1.key) }
        return ConfigTable(file: file, path: path, line: line, keys: keyed.map(\.key), entries: entries)
    }

    package static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// Reads a scalar TOMLKit's C layer returns as a malloc'd copy, and frees the copy.
    private static func take<T>(_ pointer: UnsafePointer<T>?, _ fallback: T) -> T {
        guard let pointer else { return fallback }
        defer { free(UnsafeMutableRawPointer(mutating: pointer)) }
        return pointer.pointee
    }

    static func convert(node v: OpaquePointer, path: String, file: String, index: TOMLLineIndex, parentLine: Int?) -> ConfigNode {
        let line = index.recordedLine(of: path) ?? parentLine
        switch nodeType(v) {
        case .string:
            guard let c = nodeAsString(v) else { return ConfigNode(value: .string(""), line: line) }
            defer { free(UnsafeMutablePointer(mutating: c)) }
            return ConfigNode(value: .string(String(cString: c)), line: line)
        case .integer: return ConfigNode(value: .int(Int(take(nodeAsInt(v), 0))), line: line)
        case .floatingPoint: return ConfigNode(value: .double(take(nodeAsDouble(v), 0)), line: line)
        case .boolean: return ConfigNode(value: .bool(take(nodeAsBool(v), false)), line: line)
        case .table:
            guard let t = nodeAsTable(v) else { return ConfigNode(value: .other("a table"), line: line) }
            return ConfigNode(value: .table(convert(table: t, path: path, file: file, index: index, line: line)), line: line)
        case .array:
            guard let a = nodeAsArray(v) else { return ConfigNode(value: .other("an array"), line: line) }
            var nodes: [ConfigNode] = []
            for i in 0..<arraySize(a) {
                nodes.append(convert(node: arrayGetNode(a, Int64(i)), path: "\(path)[\(i)]", file: file, index: index, parentLine: line))
            }
            return ConfigNode(value: .array(nodes), line: line)
        case .date, .timeType, .dateTime:
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
                if line.split(separator: delim, omittingEmptySubsequences: false).count % 2 == 0 { inMultiline = nil }
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
                if line.split(separator: delim, omittingEmptySubsequences: false).count == 2 { inMultiline = delim }
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
