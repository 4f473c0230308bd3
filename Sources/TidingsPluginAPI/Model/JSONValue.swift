import FoundationEssentials

/// A JSON value: the `data` of events, provider-specific details, decoded
/// responses that providers walk with JSON pointers.
package enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    package func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            if n.rounded() == n, abs(n) < 1e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Parses JSON bytes. Throws a readable error (what, and at which byte) for malformed input.
    package static func parse(_ data: Data) throws -> JSONValue {
        try JSONParser.parse(data)
    }

    package subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    package var stringValue: String? {
        switch self {
        case .string(let s): return s
        case .number(let n): return n.rounded() == n && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): return b ? "true" : "false"
        default: return nil
        }
    }

    package var doubleValue: Double? {
        switch self {
        case .number(let n): return n
        case .string(let s): return Double(s)
        default: return nil
        }
    }

    package var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    package var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    package var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }
    package var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Compact JSON text with sorted keys (stable for fingerprints). Byte-identical to
    /// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` wherever that succeeds;
    /// never fails (see ``CompactJSONWriter``).
    package func jsonString() -> String {
        var writer = CompactJSONWriter()
        writer.write(self)
        return writer.string
    }
}

package struct JSONParseError: Error, CustomStringConvertible, Sendable {
    package var message: String
    package var description: String { message }
    package init(message: String) { self.message = message }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral,
    ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { $1 }))
    }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    package init(integerLiteral value: Int) { self = .number(Double(value)) }
    package init(floatLiteral value: Double) { self = .number(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
}
