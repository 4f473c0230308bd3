import FoundationEssentials

/// Parses JSON text (RFC 8259) straight into a ``JSONValue``.
///
/// `JSONDecoder` into `JSONValue` has to guess each value's type by trying and failing
/// (`Bool`? `Double`? `String`? …), and every failed guess builds and throws an error; that
/// made reading stored items and provider responses the most expensive part of a poll. This
/// reads each byte once. It accepts exactly what `JSONDecoder` accepts for `JSONValue`
/// (`JSONParserTests` compares the two), with errors that say what and where.
///
/// One difference on purpose: of an object's repeated member names (which RFC 8259 leaves
/// unpredictable), `JSONDecoder` keeps the first. Here the value kept does not depend on
/// their order: a server that repeats a name in a varying order would otherwise make its
/// items look `changed` on every poll.
package struct JSONParser {
    /// Containers nested deeper than this are refused (as `JSONDecoder` does).
    static let maximumDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    package static func parse(_ data: Data) throws(JSONParseError) -> JSONValue {
        do {
            return try data.withUnsafeBytes { raw in
                var p = JSONParser(raw.bindMemory(to: UInt8.self))
                p.skipWhitespace()
                let v = try p.value(depth: 0)
                p.skipWhitespace()
                if p.i < p.bytes.count { throw p.failure("unexpected \(p.describeByte()) after the JSON value") }
                return v
            }
        } catch let e as JSONParseError {
            throw e
        } catch {
            throw JSONParseError(message: "malformed JSON")
        }
    }

    package static func parse(_ text: String) throws(JSONParseError) -> JSONValue { try parse(Data(text.utf8)) }

    // MARK: values

    private mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
        guard i < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw failure("unexpected \(describeByte())")
        }
    }

    private mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < Self.maximumDepth else { throw failure("nested too deeply (over \(Self.maximumDepth) levels)") }
        i += 1
        var out: [String: JSONValue] = [:]
        var repeated: [String: String] = [:]
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return .object(out)
        }
        while true {
            skipWhitespace()
            // One trailing comma is tolerated, as JSONDecoder does.
            if !out.isEmpty, i < bytes.count, bytes[i] == UInt8(ascii: "}") {
                i += 1
                return .object(out)
            }
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw failure("expected a quoted key") }
            let key = try string()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw failure("expected ':' after a key") }
            i += 1
            skipWhitespace()
            let v = try value(depth: depth)
            if let earlier = out[key] {
                // A repeated name: keep the value whose JSON text sorts first (each text made
                // once, so a hostile run of repeats stays linear).
                let kept = repeated[key] ?? earlier.jsonString()
                let text = v.jsonString()
                if CompactJSONWriter.keyOrder(text, kept) {
                    out[key] = v
                    repeated[key] = text
                } else {
                    repeated[key] = kept
                }
            } else {
                out[key] = v
            }
            skipWhitespace()
            guard i < bytes.count else { throw failure("unexpected end of input in an object") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                return .object(out)
            }
            throw failure("expected ',' or '}' in an object, found \(describeByte())")
        }
    }

    private mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth < Self.maximumDepth else { throw failure("nested too deeply (over \(Self.maximumDepth) levels)") }
        i += 1
        var out: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1
            return .array(out)
        }
        while true {
            skipWhitespace()
            if !out.isEmpty, i < bytes.count, bytes[i] == UInt8(ascii: "]") {
                i += 1
                return .array(out)
            }
            out.append(try value(depth: depth))
            skipWhitespace()
            guard i < bytes.count else { throw failure("unexpected end of input in an array") }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if bytes[i] == UInt8(ascii: "]") {
                i += 1
                return .array(out)
            }
            throw failure("expected ',' or ']' in an array, found \(describeByte())")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw failure("unexpected end of input") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw failure("unexpected \(describeByte())") }
        i += n
    }

    private mutating func number() throws(JSONParseError) -> Double {
        let start = i
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.i
            while p.i < p.bytes.count, p.bytes[p.i] >= 48, p.bytes[p.i] <= 57 { p.i += 1 }
            return p.i - s
        }
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 else { throw failure("a number needs digits") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 { throw failure("numbers must not have leading zeros") }
        } else {
            _ = digits(&self)
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits(&self) > 0 else { throw failure("a number needs digits after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits(&self) > 0 else { throw failure("a number needs digits in its exponent") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        guard let d = Double(text), d.isFinite else {
            i = start
            throw failure("number \(text.prefix(40)) does not fit in a double")
        }
        return d
    }

    private mutating func string() throws(JSONParseError) -> String {
        i += 1  // opening quote
        let start = i
        // Fast path: no escapes.
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                let s = try utf8(start, i)
                i += 1
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw failure("unescaped control character in a string") }
            i += 1
        }
        var out: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<i]))
        while i < bytes.count {
            let c = bytes[i]
            switch c {
            case UInt8(ascii: "\""):
                i += 1
                return try utf8(out)
            case UInt8(ascii: "\\"):
                i += 1
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                            throw failure("unpaired UTF-16 surrogate in a \\u escape")
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired UTF-16 surrogate in a \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw failure("unpaired UTF-16 surrogate in a \\u escape")
                    }
                    out.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
                default:
                    i -= 1
                    throw failure("invalid escape '\\\(describeByte())'")
                }
            default:
                if c < 0x20 { throw failure("unescaped control character in a string") }
                out.append(c)
                i += 1
            }
        }
        throw failure("unterminated string")
    }

    private mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw failure("a \\u escape needs four hex digits") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 48...57: d = UInt32(c - 48)
            case 65...70: d = UInt32(c - 55)
            case 97...102: d = UInt32(c - 87)
            default: throw failure("a \\u escape needs four hex digits")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    private func utf8(_ from: Int, _ to: Int) throws(JSONParseError) -> String {
        try utf8(UnsafeBufferPointer(rebasing: bytes[from..<to]))
    }

    private func utf8<C: Collection>(_ b: C) throws(JSONParseError) -> String where C.Element == UInt8 {
        guard let s = String(validating: b, as: UTF8.self) else { throw failure("invalid UTF-8 in a string") }
        return s
    }

    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private func describeByte() -> String {
        guard i < bytes.count else { return "end of input" }
        let c = bytes[i]
        return c >= 0x20 && c < 0x7F ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x" + (c < 0x10 ? "0" : "") + String(c, radix: 16)
    }

    private func failure(_ what: String) -> JSONParseError {
        JSONParseError(message: "malformed JSON: \(what) at byte \(i)")
    }
}
