import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// Catches, before toml++ sees them, the malformed inputs on which toml++ 3.4.0 (inside TOMLKit)
/// asserts instead of reporting a syntax error: the assertion aborts the process in a debug
/// build and is undefined behaviour (`__builtin_assume`) in a release build. Found by `make fuzz`:
///
/// - a table header whose key starts with a character that cannot start a key: `[é]`, `[[{a]]`;
/// - a date-time whose time does not start with a digit: `1979-05-27T(07:32:00Z`, `2026-01-01T`;
/// - a `}` where an array expects an element: `a = [1, }`.
///
/// It also bounds how deep a document nests (``maxDepth``): table header segments, dotted key
/// segments, arrays and inline tables together. A 16 KB line `a.a.a.…=1` nests 8,000 tables,
/// which took minutes to load; no configuration needs more than a handful of levels.
///
/// A small lexer (strings, comments, nesting of arrays and inline tables) finds headers, keys and
/// values; everything else is left to the parser, which reports it as usual.
package enum TOMLPrecheck {
    /// The deepest a value may sit: header segments + inline tables and arrays + key segments.
    package static let maxDepth = 32

    /// Throws a ``ConfigError`` for the first such input.
    package static func check(_ text: String, file: String) throws {
        let s = Array(text.unicodeScalars)
        var i = s.first == "\u{FEFF}" ? 1 : 0  // toml++ skips a byte order mark
        var line = 1
        var nesting: [Unicode.Scalar] = []  // open `[` / `{` of values (arrays, inline tables)
        var atLineStart = true  // only blanks so far on this line, outside any value
        var inHeader = false  // between a header's `[` and the end of its line
        var valueNext = false  // after `=`, or where an array expects an element
        var inKey = false  // between the start of a key and its `=`
        var keySegments = 0  // of the key being read (`a.b.c` is 3)
        var headerSegments = 0  // of the header being read
        var tableDepth = 0  // segments of the last table header

        func at(_ k: Int) -> Unicode.Scalar? { k < s.count ? s[k] : nil }
        func isBlank(_ c: Unicode.Scalar?) -> Bool { c == " " || c == "\t" }
        func isDigit(_ c: Unicode.Scalar?) -> Bool { c.map { ("0"..."9").contains($0) } ?? false }
        func fail(_ message: String) -> ConfigError { ConfigError(file: file, line: line, "TOML syntax: \(message)") }
        func tooDeep(_ what: String) -> ConfigError {
            ConfigError(
                file: file, line: line, "TOML: \(what) nests more than \(maxDepth) levels deep (tables, dotted keys, arrays and inline tables together)")
        }
        func startKey() {
            inKey = true
            keySegments = 1
        }

        /// Skips a string starting at `i` (its opening quote): after the closing quote, or at the
        /// newline that ends a one-line string too early (the parser reports that).
        func skipString() {
            let q = s[i]
            let multi = at(i + 1) == q && at(i + 2) == q
            i += multi ? 3 : 1
            while i < s.count {
                let c = s[i]
                if c == "\\" && q == "\"" {
                    i += 2
                    continue
                }
                if c == "\n" {
                    if !multi { return }
                    line += 1
                } else if c == q && (!multi || (at(i + 1) == q && at(i + 2) == q)) {
                    i += multi ? 3 : 1
                    return
                }
                i += 1
            }
        }

        /// toml++: `[`, blanks, an optional second `[` (an error after blanks), blanks, then the key.
        func checkHeader() throws {
            headerSegments = 1
            i += 1
            var blanks = false
            while isBlank(at(i)) {
                i += 1
                blanks = true
            }
            if at(i) == "[" && !blanks {
                i += 1
                while isBlank(at(i)) { i += 1 }
            }
            if let k = at(i), !(k == "]" || (k == "[" && blanks) || k == "\"" || k == "'" || isBareKey(k)) {
                throw fail("a table header's key must start with a letter, digit, '_', '-' or a quote, not '\(k)'")
            }
        }

        /// A bare value (number, date, boolean …) starting at `i`: toml++ takes `YYYY-MM-DD` + `T`
        /// for a date-time and then assumes a digit.
        func checkBareValue() throws {
            var end = i
            while let c = at(end), !(isBlank(c) || "\r\n]},#=[{\"'".unicodeScalars.contains(c)) { end += 1 }
            let v = s[i..<end]
            if v.count >= 11, isDigit(v.first), v[i + 4] == "-", v[i + 7] == "-", v[i + 10] == "T" || v[i + 10] == "t",
                !isDigit(at(i + 11))
            {
                throw fail("a date-time needs a time after 'T' (like 1979-05-27T07:32:00Z), not '\(String(String.UnicodeScalarView(v)))'")
            }
            i = end
        }

        while i < s.count {
            let c = s[i]
            if c == "\n" {
                line += 1
                i += 1
                if inHeader { tableDepth = headerSegments }
                inHeader = false
                atLineStart = nesting.isEmpty
                continue
            }
            if atLineStart {
                if isBlank(c) || c == "\r" {
                    i += 1
                    continue
                }
                atLineStart = false
                if c == "[" {
                    try checkHeader()
                    inHeader = true
                    continue
                }
                if c != "#" { startKey() }
            }
            if isBlank(c) || c == "\r" {
                i += 1
                continue
            }
            if c == "#" {  // a comment, up to the newline (an array may go on after it)
                while i < s.count && s[i] != "\n" { i += 1 }
                continue
            }
            let wasValueNext = valueNext
            valueNext = false
            switch c {
            case "\"", "'":
                skipString()
                continue
            case "=":
                valueNext = !inHeader
                if inKey && tableDepth + nesting.count + keySegments > maxDepth { throw tooDeep("a key") }
                inKey = false
            case "." where inHeader:
                headerSegments += 1
                if headerSegments > maxDepth { throw tooDeep("a table header") }
            case "." where inKey:
                keySegments += 1
                if tableDepth + nesting.count + keySegments > maxDepth { throw tooDeep("a key") }
            case "}" where wasValueNext && nesting.last == "[":
                // toml++ hands a `}` where an array expects an element to its value parser, which asserts.
                throw fail("expected a value or ']' in an array, saw '}'")
            case "[", "{":
                if !inHeader {
                    nesting.append(c)
                    if tableDepth + nesting.count > maxDepth { throw tooDeep("a value") }
                    valueNext = c == "["
                    if c == "{" { startKey() }
                }
            case "]", "}":
                if !inHeader { _ = nesting.popLast() }
                inKey = false
            case ",":
                valueNext = nesting.last == "["
                if nesting.last == "{" { startKey() }
            default:
                if wasValueNext {
                    try checkBareValue()
                    continue
                }
            }
            i += 1
        }
    }

    /// TOML 1.0 bare key characters: `A-Z a-z 0-9 _ -`.
    package static func isBareKey(_ c: Unicode.Scalar) -> Bool {
        switch c {
        case "A"..."Z", "a"..."z", "0"..."9", "_", "-": return true
        default: return false
        }
    }
}
