import FoundationEssentials
import Glibc

/// Compact JSON text with sorted keys, written straight into a byte buffer.
///
/// Produces exactly the bytes of Foundation's `JSONEncoder` with
/// `[.sortedKeys, .withoutEscapingSlashes]` on Linux (keys ordered by their UTF-8 bytes, the
/// same escapes, the same number spelling), which matters: item fingerprints hash this text
/// and are stored, so a different spelling would report every stored item as changed.
/// `JSONWriterTests` checks it against `JSONEncoder` on random and edge-case values.
///
/// It exists because `JSONEncoder` was most of the cost of de-duplication (it builds a
/// boxed tree of every value, then serialises it); this writes each value once.
///
/// Unlike `JSONEncoder` it never fails: writing an event or a stored item cannot go wrong at
/// write time. Where `JSONEncoder` throws, it writes what ``JSONParser`` can still read back:
/// a non-finite number as `null` (as JavaScript's `JSON.stringify` does) and a container
/// nested past ``maximumDepth`` as the string ``tooDeepMarker``. Items never get near either:
/// ``ItemIntake`` bounds them with visible markers when a poll takes them in.
package struct CompactJSONWriter {
    /// ``JSONParser`` (and `JSONEncoder`) refuse deeper nesting: containers at this depth or
    /// deeper are written as ``tooDeepMarker``.
    static let maximumDepth = 512

    /// What stands in for a container nested too deeply to be read back.
    static let tooDeepMarker = "…(nested deeper than \(maximumDepth) levels: left out)"

    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    package var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Writes `value`, `depth` containers deep (0 at the top). Every value has a spelling:
    /// see the type's notes for what `JSONEncoder` would refuse.
    mutating func write(_ value: JSONValue, depth: Int = 0) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .number(let n): write(number: n)
        case .string(let s): write(string: s)
        case .array(let a):
            guard depth + 1 < Self.maximumDepth else { return write(string: Self.tooDeepMarker) }
            bytes.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                write(v, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let o):
            guard depth + 1 < Self.maximumDepth else { return write(string: Self.tooDeepMarker) }
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for key in o.keys.sorted(by: Self.keyOrder) {
                write(key: key, first: first)
                first = false
                write(o[key]!, depth: depth + 1)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// The order `JSONEncoder` uses for `.sortedKeys` on Linux: by UTF-8 bytes (memcmp, not
    /// `String.<`, which compares canonically equivalent text as equal).
    package static func keyOrder(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let n = min(x.count, y.count)
                let c = n == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, n)
                return c != 0 ? c < 0 : x.count < y.count
            }
        }
    }

    /// A number as ``JSONValue`` encodes it: integral values below 1e15 as integers, others
    /// as `JSONEncoder` spells a `Double` (Swift's shortest round-trip spelling minus a
    /// trailing `.0`); NaN and infinities, which JSON cannot spell, as `null`.
    mutating func write(number n: Double) {
        guard n.isFinite else { return append("null") }
        if n.rounded() == n, abs(n) < 1e15 { return append(String(Int64(n))) }
        var s = n.description
        if s.hasSuffix(".0") { s.removeLast(2) }
        append(s)
    }

    /// A quoted string with `JSONEncoder`'s escapes (`/` left alone).
    mutating func write(string s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var mark = 0
            for (i, c) in utf8.enumerated() where c < 0x20 || c == 0x22 || c == 0x5C {
                if i > mark { bytes.append(contentsOf: utf8[mark..<i]) }
                mark = i + 1
                bytes.append(UInt8(ascii: "\\"))
                switch c {
                case 0x22: bytes.append(0x22)
                case 0x5C: bytes.append(0x5C)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(Self.hexDigits[Int(c >> 4)])
                    bytes.append(Self.hexDigits[Int(c & 0x0F)])
                }
            }
            if utf8.count > mark { bytes.append(contentsOf: utf8[mark...]) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `"key":` — for callers writing an object with a fixed, already-sorted set of keys.
    mutating func write(key: String, first: Bool) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        write(string: key)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    mutating func append(byte: UInt8) { bytes.append(byte) }
}
