import TidingsPluginAPI
import FoundationEssentials

/// A value in an IMAP answer (RFC 3501 §4): an atom or number, a string (quoted or a literal
/// `{n}` and its n bytes), NIL, or a parenthesized list.
indirect enum IMAPValue: Equatable {
    case atom(String)
    case string([UInt8])
    case null
    case list([IMAPValue])

    var bytes: [UInt8]? {
        switch self {
        case .string(let b): return b
        case .atom(let a): return Array(a.utf8)
        default: return nil
        }
    }

    var number: UInt32? {
        if case .atom(let a) = self { return UInt32(a) }
        return nil
    }
}

/// What a poll needs from the untagged lines of an IMAP answer.
enum IMAPUntagged: Equatable {
    /// `* OK [UIDVALIDITY n]`
    case uidValidity(UInt32)
    /// `* n EXISTS`
    case exists(Int)
    /// `* SEARCH 1 2 3` (UIDs, for `UID SEARCH`)
    case search([UInt32])
    /// `* ESEARCH (TAG "A3") UID ALL 1:5,9` (RFC 4731, for `UID SEARCH RETURN (ALL)`): the UIDs
    /// as ranges, as the server wrote them.
    case esearch([ClosedRange<UInt32>])
    /// `* CAPABILITY …` or `* OK [CAPABILITY …]`: upper-cased.
    case capabilities([String])
    /// `* n FETCH (NAME value …)`: attributes by upper-cased name, the section of `BODY[…]`
    /// kept (`BODY[TEXT]`, `BODY[HEADER.FIELDS (…)]`) and a partial's `<0>` dropped.
    case fetch([String: IMAPValue])

    var uidValidity: UInt32? {
        if case .uidValidity(let v) = self { return v }
        return nil
    }

    var searchUIDs: [UInt32]? {
        if case .search(let u) = self { return u }
        return nil
    }

    var searchRanges: [ClosedRange<UInt32>]? {
        if case .esearch(let r) = self { return r }
        return nil
    }

    var capabilities: [String]? {
        if case .capabilities(let c) = self { return c }
        return nil
    }
}

/// Reads an IMAP answer as the mailbox port returns it: every line the server sent, tagged and
/// untagged, literals inline. Tolerant where servers differ (runs of spaces, lower-case names,
/// a literal anywhere a string may be), strict where a mistake would misread data (a literal
/// is exactly its byte count; an answer cut inside one is an error). Nesting is bounded.
struct IMAPResponseParser {
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    static let maxDepth = 32

    private let b: [UInt8]
    private var i = 0

    init(_ data: Data) { b = [UInt8](data) }

    /// The untagged responses this parser understands, in order; others are skipped.
    static func parse(_ data: Data) throws -> [IMAPUntagged] {
        var p = IMAPResponseParser(data)
        return try p.responses()
    }

    mutating func responses() throws -> [IMAPUntagged] {
        var out: [IMAPUntagged] = []
        while i < b.count {
            if b[i] == UInt8(ascii: "*"), i + 1 < b.count, b[i + 1] == UInt8(ascii: " ") {
                i += 2
                if let r = try untagged() { out.append(r) }
            }
            skipLine()
        }
        return out
    }

    private mutating func untagged() throws -> IMAPUntagged? {
        skipSpaces()
        let first = word()
        if let n = Int(first) {
            skipSpaces()
            switch word().uppercased() {
            case "EXISTS": return .exists(n)
            case "FETCH":
                skipSpaces()
                guard case .list(let items) = try value(depth: 0) else { throw Malformed(description: "FETCH without a list") }
                return .fetch(Self.attributes(items))
            default: return nil
            }
        }
        switch first.uppercased() {
        case "SEARCH":
            var uids: [UInt32] = []
            while i < b.count, b[i] != 13, b[i] != 10 {
                skipSpaces()
                if i < b.count, b[i] == UInt8(ascii: "(") {  // (MODSEQ n) of CONDSTORE
                    _ = try value(depth: 0)
                    continue
                }
                let w = word()
                if w.isEmpty {
                    if i < b.count, b[i] != 13, b[i] != 10 { i += 1 }
                    continue
                }
                if let n = UInt32(w) { uids.append(n) }
            }
            return .search(uids)
        case "ESEARCH":
            var ranges: [ClosedRange<UInt32>] = []
            while i < b.count, b[i] != 13, b[i] != 10 {
                skipSpaces()
                if i < b.count, b[i] == UInt8(ascii: "(") {  // (TAG "A3")
                    _ = try value(depth: 0)
                    continue
                }
                let name = word().uppercased()
                if name.isEmpty {
                    if i < b.count, b[i] != 13, b[i] != 10 { i += 1 }
                    continue
                }
                guard name == "ALL" else { continue }  // UID, COUNT n, MIN n …: the value is skipped as a word
                skipSpaces()
                guard let set = IMAPSyntax.ranges(word()) else { throw Malformed(description: "an unreadable ESEARCH ALL") }
                ranges += set
            }
            return .esearch(ranges)
        case "CAPABILITY":
            return .capabilities(restOfLine().uppercased().split(separator: " ").map(String.init))
        case "OK":
            skipSpaces()
            guard i < b.count, b[i] == UInt8(ascii: "[") else { return nil }
            i += 1
            switch word().uppercased() {
            case "UIDVALIDITY":
                skipSpaces()
                let digits = word().prefix(while: { $0 != "]" })
                return UInt32(digits).map { .uidValidity($0) }
            case "CAPABILITY":
                let text = restOfLine()
                return .capabilities(String(text.prefix(while: { $0 != "]" })).uppercased().split(separator: " ").map(String.init))
            default:
                return nil
            }
        default:
            return nil
        }
    }

    /// Name-value pairs of a FETCH list.
    static func attributes(_ items: [IMAPValue]) -> [String: IMAPValue] {
        var out: [String: IMAPValue] = [:]
        var k = 0
        while k + 1 < items.count {
            if case .atom(let name) = items[k] {
                var key = name.uppercased()
                if let lt = key.lastIndex(of: "<"), key.hasSuffix(">") { key = String(key[..<lt]) }
                key = key.split(separator: " ").joined(separator: " ")
                out[key] = items[k + 1]
            }
            k += 2
        }
        return out
    }

    // MARK: - Lexing

    private mutating func skipSpaces() {
        while i < b.count, b[i] == 32 || b[i] == 9 { i += 1 }
    }

    /// The rest of this line (not consumed: ``skipLine()`` follows).
    private func restOfLine() -> String {
        var end = i
        while end < b.count, b[end] != 13, b[end] != 10 { end += 1 }
        return String(decoding: b[i..<end], as: UTF8.self)
    }

    /// To the start of the next line.
    private mutating func skipLine() {
        while i < b.count, b[i] != 10 { i += 1 }
        if i < b.count { i += 1 }
    }

    private static func isAtomEnd(_ c: UInt8) -> Bool {
        c == 32 || c == 9 || c == 13 || c == 10 || c == UInt8(ascii: "(") || c == UInt8(ascii: ")")
    }

    /// An atom; `[…]` inside it (a section, a response code) is part of it, spaces and lists included.
    private mutating func word() -> String {
        let start = i
        var bracket = 0
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "[") {
                bracket += 1
            } else if c == UInt8(ascii: "]") {
                bracket = max(0, bracket - 1)
            } else if c == 13 || c == 10 {
                break
            } else if bracket == 0 && Self.isAtomEnd(c) {
                break
            }
            i += 1
        }
        return String(decoding: b[start..<i], as: UTF8.self)
    }

    mutating func value(depth: Int) throws -> IMAPValue {
        guard depth < Self.maxDepth else { throw Malformed(description: "lists nested deeper than \(Self.maxDepth)") }
        skipSpaces()
        guard i < b.count else { throw Malformed(description: "the answer ends inside a FETCH response") }
        // A literal8 (`~{n}`, RFC 3516) reads as a literal.
        if b[i] == UInt8(ascii: "~"), i + 1 < b.count, b[i + 1] == UInt8(ascii: "{") { i += 1 }
        switch b[i] {
        case UInt8(ascii: "("):
            i += 1
            var items: [IMAPValue] = []
            while true {
                skipSpaces()
                guard i < b.count, b[i] != 13, b[i] != 10 else { throw Malformed(description: "a list is not closed") }
                if b[i] == UInt8(ascii: ")") {
                    i += 1
                    return .list(items)
                }
                items.append(try value(depth: depth + 1))
            }
        case UInt8(ascii: "\""):
            i += 1
            var s: [UInt8] = []
            while i < b.count, b[i] != UInt8(ascii: "\"") {
                if b[i] == 13 || b[i] == 10 { throw Malformed(description: "a quoted string is not closed") }
                if b[i] == UInt8(ascii: "\\"), i + 1 < b.count { i += 1 }
                s.append(b[i])
                i += 1
            }
            guard i < b.count else { throw Malformed(description: "a quoted string is not closed") }
            i += 1
            return .string(s)
        case UInt8(ascii: "{"):
            i += 1
            var n = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                n = n * 10 + Int(b[i] - 48)
                guard n <= b.count else { throw Malformed(description: "a literal longer than the answer") }
                i += 1
            }
            if i < b.count, b[i] == UInt8(ascii: "+") { i += 1 }
            guard i < b.count, b[i] == UInt8(ascii: "}") else { throw Malformed(description: "a malformed literal") }
            i += 1
            if i < b.count, b[i] == 13 { i += 1 }
            guard i < b.count, b[i] == 10 else { throw Malformed(description: "a literal without its line end") }
            i += 1
            guard b.count - i >= n else { throw Malformed(description: "the answer ends inside a literal of \(n) bytes") }
            let s = Array(b[i..<(i + n)])
            i += n
            return .string(s)
        default:
            let w = word()
            if w.isEmpty {
                throw Malformed(description: "unexpected \(b[i] < 32 ? "control character" : "'\(Character(UnicodeScalar(b[i])))'")")
            }
            return w.uppercased() == "NIL" ? .null : .atom(w)
        }
    }
}

/// IMAP command arguments.
enum IMAPSyntax {
    /// A quoted string (RFC 3501 `quoted`), or nil when `s` cannot be one (line breaks, NUL).
    static func quoted(_ s: String) -> String? {
        guard !s.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else { return nil }
        return "\"" + s.replacingScalars("\\", with: "\\\\").replacingScalars("\"", with: "\\\"") + "\""
    }

    /// A mailbox name in IMAP's modified UTF-7 (RFC 3501 §5.1.3): `Entwürfe` → `Entw&APw-rfe`.
    static func mailboxName(_ s: String) -> String {
        var out = ""
        var pending: [UInt16] = []
        func flush() {
            guard !pending.isEmpty else { return }
            var bytes: [UInt8] = []
            for u in pending { bytes += [UInt8(u >> 8), UInt8(u & 0xFF)] }
            let b64 = Data(bytes).base64EncodedString().replacingScalars("/", with: ",")
                .trimming(scalarsIn: "=")
            out += "&" + b64 + "-"
            pending.removeAll()
        }
        for scalar in s.unicodeScalars {
            if scalar.value >= 0x20 && scalar.value <= 0x7E {
                flush()
                out += scalar == "&" ? "&-" : String(scalar)
            } else {
                pending += Array(String(scalar).utf16)
            }
        }
        flush()
        return out
    }

    /// A sequence set of numbers (`1:3,7,12:9`) as ascending ranges; nil if it is not one (`*` is not a number here).
    static func ranges(_ text: String) -> [ClosedRange<UInt32>]? {
        var out: [ClosedRange<UInt32>] = []
        for part in text.split(separator: ",") {
            let ends = part.split(separator: ":", omittingEmptySubsequences: false)
            guard ends.count <= 2, let a = UInt32(ends[0]), let b = UInt32(ends[ends.count - 1]) else { return nil }
            out.append(min(a, b)...max(a, b))
        }
        return out.isEmpty ? nil : out
    }

    /// UIDs as a sequence set: `1:3,7,9:12`. The UIDs are sorted first.
    static func sequenceSet(_ uids: [UInt32]) -> String {
        var parts: [String] = []
        var run: (UInt32, UInt32)?
        for u in uids.sorted() {
            if let r = run, u == r.1 + 1 || u == r.1 {
                run = (r.0, u)
                continue
            }
            if let r = run { parts.append(r.0 == r.1 ? "\(r.0)" : "\(r.0):\(r.1)") }
            run = (u, u)
        }
        if let r = run { parts.append(r.0 == r.1 ? "\(r.0)" : "\(r.0):\(r.1)") }
        return parts.joined(separator: ",")
    }
}

/// The UIDs a search matched, as ascending disjoint ranges: an ESEARCH answer of `1:4000000000`
/// is one range, never four billion numbers.
struct MatchingUIDs: Equatable {
    private(set) var ranges: [ClosedRange<UInt32>] = []

    init(_ given: [ClosedRange<UInt32>]) {
        for r in given.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = ranges.last, UInt64(r.lowerBound) <= UInt64(last.upperBound) + 1 {
                ranges[ranges.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                ranges.append(r)
            }
        }
    }

    init(uids: [UInt32]) { self.init(uids.map { $0...$0 }) }

    var count: Int { ranges.reduce(0) { $0 + Int($1.upperBound - $1.lowerBound) + 1 } }

    /// The highest `n` UIDs (the newest messages), ascending.
    func newest(_ n: Int) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(min(n, count))
        for r in ranges.reversed() {
            var u = r.upperBound
            while out.count < n {
                out.append(u)
                if u == r.lowerBound { break }
                u -= 1
            }
            if out.count >= n { break }
        }
        return out.reversed()
    }
}
