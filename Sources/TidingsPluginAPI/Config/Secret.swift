import FoundationEssentials
import Glibc
import Synchronization

/// A credential read from config. Prints as `‹redacted›` so it cannot leak by interpolation;
/// the value (with its parts and encodings, see ``SecretShape``) is also registered with
/// ``Redactor`` so logs, errors and remote text are scrubbed of it.
package struct Secret: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    package let value: String
    package init(_ value: String, shape: SecretShape = .opaque) {
        self.value = value
        Redactor.shared.register(value, shape: shape)
    }
    package var description: String { Redactor.mask }
    package var debugDescription: String { Redactor.mask }
}

/// What a secret looks like, which decides what else of it the ``Redactor`` recognises.
package enum SecretShape: Sendable {
    /// A password or token: the value itself, and its encodings.
    case opaque
    /// A whole HTTP header value (`Bearer X`, `Basic dXNlcjpwYXNz`, `a=1; session=X`): also each
    /// token part (`X`; the decoded `user:pass`, `user` and `pass`; `X`), and their encodings.
    case headerValue
}

/// Scrubs known secrets out of text before it reaches a log, an error, an event or the state.
///
/// Each secret is known in every form a server or a library is likely to echo it in
/// (``SecretForms``): raw, JSON-escaped, percent-encoded, form-encoded, and for header values
/// each token part; and raw with any of its bytes percent-encoded, in either hex case
/// (`pa$$w0rd%21`, as a URL-builder that encodes only some characters writes it). Scrubbing is one pass over the bytes: a table of the byte pairs a form can
/// start with passes over everything else, so text without secrets costs little more than
/// reading it (it runs on every log line, every event title and body, every response body).
package final class Redactor: Sendable {
    package static let shared = Redactor()
    /// What a secret is replaced with.
    package static let mask = "‹redacted›"

    private struct State {
        var forms: Set<[UInt8]> = []
        /// The secrets (and header token parts) as bytes, each of which may come percent-encoded.
        var pieces: Set<[UInt8]> = []
        /// Built from `forms` and `pieces` on the first scrub after a change.
        var table: NeedleTable?
    }
    private let state = Mutex(State())

    package init() {}

    /// Remembers `value` (values shorter than ``SecretForms/minimumLength`` characters are
    /// ignored: they would redact ordinary words; the config refuses such secrets).
    package func register(_ value: String, shape: SecretShape = .opaque) {
        let pieces = SecretForms.pieces(value, shape: shape)
        guard !pieces.isEmpty else { return }
        // The pieces match raw and percent-encoded in any mix: the literal forms are the others.
        var forms = SecretForms.of(value, shape: shape)
        for piece in pieces {
            forms.remove(piece)
            for style in SecretForms.PercentStyle.allCases where style != .form { forms.remove(SecretForms.percentEncoded(piece, style)) }
        }
        state.withLock { s in
            let before = (s.forms.count, s.pieces.count)
            s.forms.formUnion(forms.lazy.map { Array($0.utf8) })
            s.pieces.formUnion(pieces.lazy.map { Array($0.utf8) })
            if (s.forms.count, s.pieces.count) != before { s.table = nil }
        }
    }

    private var table: NeedleTable? {
        state.withLock { s in
            guard !s.forms.isEmpty || !s.pieces.isEmpty else { return nil }
            if let t = s.table { return t }
            let t = NeedleTable(s.forms, pieces: s.pieces)
            s.table = t
            return t
        }
    }

    package func scrub(_ text: String) -> String {
        scrubbed(text) ?? text
    }

    /// `text` scrubbed, or nil when it holds no secret (nothing copied).
    package func scrubbed(_ text: String) -> String? {
        guard let table else { return nil }
        return Self.scrubbed(text, table)
    }

    private static func scrubbed(_ text: String, _ table: NeedleTable) -> String? {
        var text = text
        guard let out = text.withUTF8({ table.scrub($0) }) else { return nil }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` with every string in it, object keys included, scrubbed; nil when it holds no
    /// secret (the common case: one walk, nothing copied).
    package func scrubbed(_ value: JSONValue) -> JSONValue? {
        guard let table else { return nil }
        return Self.scrubbed(value, table)
    }

    private static func scrubbed(_ value: JSONValue, _ table: NeedleTable) -> JSONValue? {
        switch value {
        case .null, .bool, .number: return nil
        case .string(let s): return scrubbed(s, table).map(JSONValue.string)
        case .array(let a):
            var out: [JSONValue]?
            for (i, v) in a.enumerated() {
                guard let s = scrubbed(v, table) else { continue }
                if out == nil { out = a }
                out![i] = s
            }
            return out.map(JSONValue.array)
        case .object(let o):
            var changes: [String: (key: String?, value: JSONValue?)] = [:]
            for (k, v) in o {
                let key = scrubbed(k, table)
                let new = scrubbed(v, table)
                if key != nil || new != nil { changes[k] = (key, new) }
            }
            guard !changes.isEmpty else { return nil }
            var out = o
            for k in changes.keys.sorted() { out[k] = nil }
            // In key order, so that two keys scrubbed to one name are numbered the same way on
            // every poll (`‹redacted›`, `‹redacted› (2)`).
            for k in changes.keys.sorted() {
                let (key, new) = changes[k]!
                var name = key ?? k
                var n = 2
                while out[name] != nil {
                    name = (key ?? k) + " (\(n))"
                    n += 1
                }
                out[name] = new ?? o[k]!
            }
            return .object(out)
        }
    }

    /// Scrubs bytes (a response body, before anything parses it).
    package func scrub(_ data: Data) -> Data {
        guard let table, !data.isEmpty else { return data }
        guard let out = data.withUnsafeBytes({ table.scrub($0.bindMemory(to: UInt8.self)) }) else { return data }
        return Data(out)
    }

    /// A short, one-line excerpt of a body for messages. Scrubbed before it is cut, over more
    /// than is shown, so no part of a secret survives the cut.
    package func excerpt(_ body: Data, limit: Int = 200) -> String {
        let window = String(decoding: body.prefix(limit * 4 + 8192), as: UTF8.self)
        let text = scrub(window).replacingLineBreaks(with: " ").trimmed(newlines: false)
        return shortened(text, to: limit)
    }

    /// `text` for a message: scrubbed, then cut to `limit` characters (and `…`). Always in this
    /// order: a secret straddling the cut would leave its first part, which no scrub recognises.
    package func shortened(_ text: String, to limit: Int) -> String {
        let text = scrub(text)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }
}

/// The forms of secrets, indexed for one-pass scrubbing (immutable once built).
final class NeedleTable: Sendable {
    /// `pairs[b0 << 8 | b1] != 0` when some form begins with the bytes `b0 b1` (every form has
    /// at least 4): most positions of a text are passed over on one load.
    private let pairs: [UInt8]
    /// Forms by first byte, longest first (the longest match at a position wins).
    private let byFirstByte: [[[UInt8]]]
    /// Pieces (secrets as bytes, each byte raw or `%XX` in the text) by first byte, longest first.
    private let piecesByFirstByte: [[[UInt8]]]
    /// `pieceStarts[b0 << 8 | b1] != 0` when a piece begins with the bytes `b0 b1` (decoded):
    /// a `%XX` in the text is looked at further only when it may begin one.
    private let pieceStarts: [UInt8]
    private static let mask = Array(Redactor.mask.utf8)
    private static let percent = UInt8(ascii: "%")

    init(_ forms: Set<[UInt8]>, pieces: Set<[UInt8]> = []) {
        var lists = [[[UInt8]]](repeating: [], count: 256)
        var pieceLists = [[[UInt8]]](repeating: [], count: 256)
        var pairs = [UInt8](repeating: 0, count: 1 << 16)
        var pieceStarts = [UInt8](repeating: 0, count: 1 << 16)
        for f in forms where f.count >= 2 {
            lists[Int(f[0])].append(f)
            pairs[Int(f[0]) << 8 | Int(f[1])] = 1
        }
        let hex = Array("0123456789ABCDEFabcdef".utf8)
        for p in pieces where p.count >= 2 {
            pieceLists[Int(p[0])].append(p)
            pieceStarts[Int(p[0]) << 8 | Int(p[1])] = 1
            // Its first two bytes as they may start: raw raw, raw `%`, or `%` and either hex case.
            pairs[Int(p[0]) << 8 | Int(p[1])] = 1
            pairs[Int(p[0]) << 8 | Int(Self.percent)] = 1
            let high = Int(p[0] >> 4)
            pairs[Int(Self.percent) << 8 | Int(hex[high])] = 1
            if high >= 10 { pairs[Int(Self.percent) << 8 | Int(hex[high + 6])] = 1 }
        }
        byFirstByte = lists.map { $0.sorted { $0.count > $1.count } }
        piecesByFirstByte = pieceLists.map { $0.sorted { $0.count > $1.count } }
        self.pairs = pairs
        self.pieceStarts = pieceStarts
    }

    /// The bytes with every form replaced by the mask, or nil if there was none.
    func scrub(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        // Everything mutable is local to the closure, and the hot loop does nothing but look up
        // byte pairs: this keeps the scan at the speed of a plain loop over the bytes.
        pairs.withUnsafeBufferPointer { pairs -> [UInt8]? in
            var out: [UInt8] = []
            var copied = 0
            var i = 0
            let n = bytes.count
            while true {
                // The hot loop: to the next position where a form may start.
                while i &+ 1 < n && pairs[Int(bytes[i]) &<< 8 | Int(bytes[i &+ 1])] == 0 { i &+= 1 }
                guard i &+ 1 < n else { break }
                guard let length = match(bytes, at: i) else {
                    i &+= 1
                    continue
                }
                if out.isEmpty { out.reserveCapacity(n) }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<i]))
                out.append(contentsOf: Self.mask)
                i += length
                copied = i
            }
            guard !out.isEmpty else { return nil }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<n]))
            return out
        }
    }

    /// The length of the longest form or piece at `i`.
    private func match(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Int? {
        let left = bytes.count - i
        var best: Int?
        for form in byFirstByte[Int(bytes[i])] where form.count <= left {
            let equal = form.withUnsafeBufferPointer { f in memcmp(f.baseAddress!, bytes.baseAddress! + i, f.count) == 0 }
            if equal {
                best = form.count
                break
            }
        }
        // A piece starts with its first byte raw, or `%XX` of it.
        if let length = pieceMatch(bytes, at: i, first: bytes[i], next: i + 1), length > (best ?? 0) { best = length }
        if let first = Self.decoded(bytes, at: i), let length = pieceMatch(bytes, at: i, first: first, next: i + 3), length > (best ?? 0) {
            best = length
        }
        return best
    }

    /// The longest piece at `i` whose first byte is `first` and whose second begins at `next`
    /// (raw or `%XX`); the pieces are walked only when their first two bytes may be there.
    private func pieceMatch(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int, first: UInt8, next: Int) -> Int? {
        guard next < bytes.count else { return nil }
        let raw = bytes[next]
        let second = Self.decoded(bytes, at: next) ?? raw
        guard pieceStarts[Int(first) << 8 | Int(raw)] != 0 || pieceStarts[Int(first) << 8 | Int(second)] != 0 else { return nil }
        var best: Int?
        for piece in piecesByFirstByte[Int(first)] where piece.count <= bytes.count - i {
            if let length = Self.length(of: piece, in: bytes, at: i), length > (best ?? 0) { best = length }
        }
        return best
    }

    /// The byte `%XX` at `i` stands for (either hex case), if it is one.
    @inline(__always)
    private static func decoded(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> UInt8? {
        guard i + 2 < bytes.count, bytes[i] == percent, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) else { return nil }
        return h << 4 | l
    }

    /// The value of a hex digit, either case.
    @inline(__always)
    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    /// How many bytes of text at `i` spell `piece` with each byte raw or `%XX`, or nil.
    ///
    /// Only a `%` of the piece meeting `%25` in the text can be read two ways (raw, or encoded);
    /// the other reading is tried when the first fails, each at most once.
    private static func length(of piece: [UInt8], in bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Int? {
        var k = 0
        var j = i
        let n = bytes.count
        // The common case first: raw bytes, up to the first difference (or a `%` of the piece,
        // which may be read two ways).
        while k < piece.count, j < n, piece[k] != percent, bytes[j] == piece[k] {
            k += 1
            j += 1
        }
        if k == piece.count { return j - i }
        guard j < n, bytes[j] == percent || piece[k] == percent else { return nil }
        var pending: [(Int, Int)] = []
        var seen: Set<Int> = []
        while true {
            if k == piece.count { return j - i }
            let raw = j < n && bytes[j] == piece[k]
            let encoded = decoded(bytes, at: j) == piece[k]
            if raw && encoded, seen.insert((k + 1) << 32 | (j + 3)).inserted { pending.append((k + 1, j + 3)) }
            if raw {
                (k, j) = (k + 1, j + 1)
            } else if encoded {
                (k, j) = (k + 1, j + 3)
            } else if let other = pending.popLast() {
                (k, j) = other
            } else {
                return nil
            }
        }
    }
}

/// Every form in which a secret may come back: in JSON, in a URL or form, or split into the
/// token parts of a header value. Pure, so tests can see exactly what is recognised.
package enum SecretForms {
    /// Shorter values are not secrets the ``Redactor`` scrubs.
    package static let minimumLength = 4

    /// `value`, and for a header value its token parts, each in every encoding below.
    package static func of(_ value: String, shape: SecretShape) -> Set<String> {
        pieces(value, shape: shape).reduce(into: []) { $0.formUnion(encodings($1)) }
    }

    /// `value`, and for a header value its token parts: those long enough to be scrubbed.
    package static func pieces(_ value: String, shape: SecretShape) -> [String] {
        var pieces = [value]
        if shape == .headerValue { pieces += tokenParts(value) }
        return pieces.filter { $0.count >= minimumLength }
    }

    /// The parts of a header value that are secrets on their own: all after a leading scheme
    /// (`Bearer X` → `X`), every other word, the value of each `name=value` (`a=1; session=X`
    /// → `X`), and for `Basic` the decoded `user:pass` with `user` and `pass`.
    package static func tokenParts(_ value: String) -> [String] {
        let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," || $0 == ";" }).map(String.init)
        var parts: [String] = []
        for (i, word) in words.enumerated() {
            if i == 0, words.count > 1, word.allSatisfy({ $0.isASCII && $0.isLetter }) {
                let rest = value.drop { $0 != " " && $0 != "\t" }.drop { $0 == " " || $0 == "\t" }
                parts.append(String(rest))
                continue
            }
            parts.append(word)
            if let eq = word.firstIndex(of: "="), eq != word.startIndex {
                let v = word[word.index(after: eq)...].trimmed { $0 == "\"" || $0 == "'" }
                if !v.isEmpty, !v.allSatisfy({ $0 == "=" }) { parts.append(v) }
            }
        }
        if words.count == 2, words[0].lowercased() == "basic", let decoded = base64Text(words[1]) {
            parts.append(decoded)
            if let colon = decoded.firstIndex(of: ":") {
                parts.append(String(decoded[..<colon]))
                parts.append(String(decoded[decoded.index(after: colon)...]))
            }
        }
        return parts
    }

    /// Raw, JSON-escaped (as the common encoders write it, and JSON inside JSON), and
    /// percent-encoded (RFC 3986, either hex case; HTML forms; JavaScript; paths).
    package static func encodings(_ s: String) -> Set<String> {
        var forms: Set<String> = [s]
        for options in [JSONEscaping(), [.asciiOnly], [.asciiOnly, .slash], [.html]] as [JSONEscaping] {
            let escaped = jsonEscaped(s, options)
            forms.insert(escaped)
            forms.insert(jsonEscaped(escaped, options))
        }
        for style in PercentStyle.allCases { forms.insert(percentEncoded(s, style)) }
        return forms
    }

    package struct JSONEscaping: OptionSet, Sendable {
        package let rawValue: Int
        package init(rawValue: Int) { self.rawValue = rawValue }
        /// Non-ASCII as `\uXXXX` (Python's default, PHP).
        package static let asciiOnly = JSONEscaping(rawValue: 1)
        /// `/` as `\/` (PHP).
        package static let slash = JSONEscaping(rawValue: 2)
        /// `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX` (Go).
        package static let html = JSONEscaping(rawValue: 4)
    }

    package static func jsonEscaped(_ s: String, _ options: JSONEscaping) -> String {
        var out = ""
        func hex(_ u: UInt16) { out += "\\u" + String(repeating: "0", count: 4 - String(u, radix: 16).count) + String(u, radix: 16) }
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "/" where options.contains(.slash): out += "\\/"
            default:
                if options.contains(.html), ["<", ">", "&", "\u{2028}", "\u{2029}"].contains(scalar) {
                    hex(UInt16(scalar.value))
                } else if scalar.value < 0x20 || (scalar.value > 0x7E && options.contains(.asciiOnly)) {
                    for unit in String(scalar).utf16 { hex(unit) }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    package enum PercentStyle: CaseIterable, Sendable {
        /// RFC 3986 unreserved kept, upper-case hex (Python's `quote(safe="")`, Swift, curl).
        case unreserved
        /// The same with lower-case hex.
        case unreservedLowerHex
        /// HTML form encoding: space as `+`, `*` kept.
        case form
        /// JavaScript's `encodeURIComponent`: `!'()*` kept too.
        case uriComponent
        /// A path segment as Python's `quote` writes it by default: `/` kept.
        case path
    }

    package static func percentEncoded(_ s: String, _ style: PercentStyle) -> String {
        let kept: Set<UInt8>
        switch style {
        case .unreserved, .unreservedLowerHex: kept = Set("-._~".utf8)
        case .form: kept = Set("*-._".utf8)
        case .uriComponent: kept = Set("-_.!~*'()".utf8)
        case .path: kept = Set("-._~/".utf8)
        }
        let digits = Array((style == .unreservedLowerHex ? "0123456789abcdef" : "0123456789ABCDEF").utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            let alnum = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
            if alnum || kept.contains(b) {
                out.append(b)
            } else if b == 0x20 && style == .form {
                out.append(UInt8(ascii: "+"))
            } else {
                out += [UInt8(ascii: "%"), digits[Int(b >> 4)], digits[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Base64 (standard or URL-safe, padding optional) that decodes to UTF-8 text.
    static func base64Text(_ s: String) -> String? {
        var b = s.replacingScalars("-", with: "+").replacingScalars("_", with: "/")
        while b.count % 4 != 0 { b += "=" }
        guard let data = Data(base64Encoded: b), let text = String(data: data, encoding: .utf8), !text.isEmpty else { return nil }
        return text
    }
}
