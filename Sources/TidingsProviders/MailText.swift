import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif
import TidingsPluginAPI

/// Reading the parts of an e-mail message a notification shows: header fields (RFC 5322
/// unfolding, RFC 2047 encoded words in any charset), and the first text part of the body
/// (MIME multiparts, quoted-printable and base64, charsets, HTML reduced to text). Everything
/// works on the head of a message that may be cut anywhere: a cut part is read as far as it goes.
enum MailText {
    // MARK: - Header fields

    /// Header fields by lower-cased name (the first of each), values unfolded, not yet decoded.
    static func headerFields(_ bytes: [UInt8]) -> [String: [UInt8]] {
        var fields: [String: [UInt8]] = [:]
        var name: String?
        var value: [UInt8] = []
        func finish() {
            if let name, fields[name] == nil { fields[name] = value }
            name = nil
            value = []
        }
        for rawLine in lines(bytes) {
            if rawLine.isEmpty { break }  // the end of the header
            if rawLine.first == 32 || rawLine.first == 9 {  // a folded continuation
                if name != nil { value += rawLine }
                continue
            }
            finish()
            guard let colon = rawLine.firstIndex(of: UInt8(ascii: ":")) else { continue }
            name = String(decoding: rawLine[..<colon], as: UTF8.self).trimmed(newlines: false).lowercased()
            value = Array(rawLine[(colon + 1)...])
        }
        finish()
        return fields
    }

    /// Lines without their CRLF or LF.
    static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = 0
        for (k, c) in bytes.enumerated() where c == 10 {
            var end = k
            if end > start, bytes[end - 1] == 13 { end -= 1 }
            out.append(bytes[start..<end])
            start = k + 1
        }
        if start < bytes.count { out.append(bytes[start...]) }
        return out
    }

    /// A header value as text: RFC 2047 encoded words decoded (whitespace between two of them
    /// dropped), raw 8-bit bytes read as UTF-8 (else Latin-1), runs of whitespace as one space,
    /// control characters removed.
    static func decodeHeader(_ raw: [UInt8]) -> String {
        var out = ""
        var k = 0
        var pendingSpace = ""
        var lastWasEncoded = false
        while k < raw.count {
            if raw[k] == UInt8(ascii: "="), k + 1 < raw.count, raw[k + 1] == UInt8(ascii: "?"),
                let (text, end) = encodedWord(raw, at: k)
            {
                if !lastWasEncoded { out += pendingSpace }
                pendingSpace = ""
                out += text
                lastWasEncoded = true
                k = end
                continue
            }
            let c = raw[k]
            if c == 32 || c == 9 || c == 13 || c == 10 {
                pendingSpace += " "
                k += 1
                continue
            }
            var end = k
            while end < raw.count, ![32, 9, 13, 10].contains(raw[end]),
                !(raw[end] == UInt8(ascii: "=") && end + 1 < raw.count && raw[end + 1] == UInt8(ascii: "?"))
            { end += 1 }
            if end == k { end += 1 }
            out += pendingSpace + text(Array(raw[k..<end]), charset: nil)
            pendingSpace = ""
            lastWasEncoded = false
            k = end
        }
        return clean(out)
    }

    /// `=?charset?B|Q?text?=` at `start`: the decoded text and the index after it.
    static func encodedWord(_ raw: [UInt8], at start: Int) -> (String, Int)? {
        // =?charset?enc?text?= ; at most 75 characters by the RFC, read up to a few hundred.
        var q: [Int] = []
        var k = start + 2
        while k < raw.count, k - start < 400 {
            let c = raw[k]
            if c == 32 || c == 9 || c == 13 || c == 10 { return nil }
            if c == UInt8(ascii: "?") {
                q.append(k)
                if q.count == 3 {
                    guard k + 1 < raw.count, raw[k + 1] == UInt8(ascii: "=") else { return nil }
                    break
                }
            }
            k += 1
        }
        guard q.count == 3, q[1] == q[0] + 2 else { return nil }
        var charset = String(decoding: raw[(start + 2)..<q[0]], as: UTF8.self)
        if let star = charset.firstIndex(of: "*") { charset = String(charset[..<star]) }  // RFC 2231 language
        let encoding = raw[q[0] + 1] | 0x20
        let payload = Array(raw[(q[1] + 1)..<q[2]])
        let bytes: [UInt8]
        switch encoding {
        case UInt8(ascii: "b"): bytes = base64(payload)
        case UInt8(ascii: "q"): bytes = quotedPrintable(payload, underscoreIsSpace: true)
        default: return nil
        }
        return (text(bytes, charset: charset), q[2] + 2)
    }

    // MARK: - Transfer encodings

    /// Base64, ignoring whitespace and anything outside the alphabet; a cut tail is dropped.
    static func base64(_ input: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(input.count * 3 / 4)
        var acc: UInt32 = 0
        var n = 0
        for c in input {
            let v: UInt32
            switch c {
            case 65...90: v = UInt32(c - 65)
            case 97...122: v = UInt32(c - 97 + 26)
            case 48...57: v = UInt32(c - 48 + 52)
            case UInt8(ascii: "+"), UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): v = 63
            case UInt8(ascii: "="):
                // Padding: what is complete so far stands.
                if n >= 2 { out.append(UInt8((acc >> (UInt32(n) * 6 - 8)) & 0xFF)) }
                if n == 3 { out.append(UInt8((acc >> 2) & 0xFF)) }
                acc = 0
                n = 0
                continue
            default: continue
            }
            acc = (acc << 6) | v
            n += 1
            if n == 4 {
                out += [UInt8((acc >> 16) & 0xFF), UInt8((acc >> 8) & 0xFF), UInt8(acc & 0xFF)]
                acc = 0
                n = 0
            }
        }
        return out
    }

    /// Quoted-printable (RFC 2045 §6.7); `_` is a space in an RFC 2047 Q word.
    static func quotedPrintable(_ input: [UInt8], underscoreIsSpace: Bool = false) -> [UInt8] {
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 65...70: return c - 55
            case 97...102: return c - 87
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(input.count)
        var k = 0
        while k < input.count {
            let c = input[k]
            if c == UInt8(ascii: "=") {
                if k + 2 < input.count, let h = hex(input[k + 1]), let l = hex(input[k + 2]) {
                    out.append(h << 4 | l)
                    k += 3
                    continue
                }
                // A soft line break: "=" then optional spaces then CRLF or LF.
                var j = k + 1
                while j < input.count, input[j] == 32 || input[j] == 9 { j += 1 }
                if j < input.count, input[j] == 13 { j += 1 }
                if j < input.count, input[j] == 10 {
                    k = j + 1
                    continue
                }
                if j >= input.count || (input.count - k <= 2 && input[(k + 1)...].allSatisfy({ hex($0) != nil })) { break }  // cut inside an escape
                out.append(c)
                k += 1
                continue
            }
            out.append(underscoreIsSpace && c == UInt8(ascii: "_") ? 32 : c)
            k += 1
        }
        return out
    }

    // MARK: - Charsets

    /// Bytes in `charset` as text: UTF-8 and US-ASCII directly, others through iconv; an unknown
    /// charset or invalid bytes fall back to UTF-8 with replacement; undeclared 8-bit bytes that
    /// are not UTF-8 are Latin-1. With `cut` (the head of a longer text), an incomplete UTF-8
    /// character at the end is dropped.
    static func text(_ bytes: [UInt8], charset: String?, cut: Bool = false) -> String {
        let name = (charset ?? "").trimming(scalarsIn: "\"' ").lowercased()
        if name.isEmpty || name == "utf-8" || name == "utf8" || name == "us-ascii" || name == "ascii" {
            var utf8 = bytes
            if cut {
                // The head of a longer text: a character cut in two is dropped, not replaced.
                var k = utf8.count
                while k > 0, utf8[k - 1] & 0xC0 == 0x80, utf8.count - k < 3 { k -= 1 }
                if k > 0, utf8[k - 1] >= 0xC0 {
                    let lead = utf8[k - 1]
                    let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
                    if utf8.count - (k - 1) < length { utf8.removeSubrange((k - 1)...) }
                }
            }
            if let s = String(validating: utf8, as: UTF8.self) { return s }
            // Undeclared (or mislabelled ASCII) 8-bit bytes that are not UTF-8: Latin-1.
            if name != "utf-8" && name != "utf8" { return String(bytes.map { Character(UnicodeScalar($0)) }) }
            return String(decoding: utf8, as: UTF8.self)
        }
        if name == "iso-8859-1" || name == "latin1" || name == "latin-1" {
            return String(bytes.map { Character(UnicodeScalar($0)) })
        }
        return iconvText(bytes, from: name) ?? String(decoding: bytes, as: UTF8.self)
    }

    /// Through iconv; nil when iconv does not know `charset`. Invalid bytes become U+FFFD.
    static func iconvText(_ bytes: [UInt8], from charset: String) -> String? {
        guard charset.utf8.count < 64, charset.allSatisfy({ $0.isLetter || $0.isNumber || "-_.:".contains($0) }) else { return nil }
        let cd = iconv_open("UTF-8", charset)
        guard let cd, cd != iconv_t(bitPattern: -1) else { return nil }
        defer { iconv_close(cd) }
        var input = bytes
        var output = [UInt8](repeating: 0, count: bytes.count * 4 + 16)
        var result: [UInt8] = []
        input.withUnsafeMutableBufferPointer { inBuf in
            output.withUnsafeMutableBufferPointer { outBuf in
                var inPtr = UnsafeMutableRawPointer(inBuf.baseAddress!).assumingMemoryBound(to: CChar.self) as UnsafeMutablePointer<CChar>?
                var inLeft = inBuf.count
                while inLeft > 0 {
                    var outPtr = UnsafeMutableRawPointer(outBuf.baseAddress!).assumingMemoryBound(to: CChar.self) as UnsafeMutablePointer<CChar>?
                    var outLeft = outBuf.count
                    let r = iconv(cd, &inPtr, &inLeft, &outPtr, &outLeft)
                    result += UnsafeRawBufferPointer(start: outBuf.baseAddress, count: outBuf.count - outLeft)
                    if r != -1 { break }
                    if errno == E2BIG { continue }
                    if errno == EINVAL { break }  // an incomplete character at the end: a cut
                    // EILSEQ: one invalid byte, replaced.
                    result += [0xEF, 0xBF, 0xBD]
                    inPtr = inPtr.map { $0 + 1 }
                    inLeft -= 1
                }
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    // MARK: - Text

    /// Control characters (terminal escapes included) removed, whitespace runs as one space.
    static func clean(_ s: String) -> String {
        String(
            String.UnicodeScalarView(
                s.unicodeScalars.map { scalar -> Unicode.Scalar in
                    scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format && scalar.value != 0x200D
                        ? " " : scalar
                })
        ).split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
    }

    /// `Content-Type` as (lower-cased `type/subtype`, parameters by lower-cased name).
    static func contentType(_ raw: [UInt8]?) -> (String, [String: String]) {
        guard let raw else { return ("text/plain", [:]) }
        let s = String(decoding: raw, as: UTF8.self)
        var parts: [String] = []
        var current = ""
        var quoted = false
        for ch in s {
            if ch == "\"" {
                quoted.toggle()
                current.append(ch)
                continue
            }
            if ch == ";" && !quoted {
                parts.append(current)
                current = ""
                continue
            }
            current.append(ch)
        }
        parts.append(current)
        let type = parts[0].trimmed().lowercased()
        var params: [String: String] = [:]
        for p in parts.dropFirst() {
            guard let eq = p.firstIndex(of: "=") else { continue }
            let key = p[..<eq].trimmed().lowercased()
            var value = p[p.index(after: eq)...].trimmed()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            params[key] = value
        }
        return (type.isEmpty ? "text/plain" : type, params)
    }

    /// The first text of a body (its head, maybe cut) given the message's `Content-Type` and
    /// `Content-Transfer-Encoding`: the first `text/plain` part, else the first `text/html`
    /// one reduced to text; multiparts are followed down to `maxDepth` levels.
    static func bodyText(_ body: [UInt8], contentType: [UInt8]?, transferEncoding: [UInt8]?, depth: Int = 0) -> String {
        let (type, params) = Self.contentType(contentType)
        if type.hasPrefix("multipart/") {
            guard depth < maxDepth, let boundary = params["boundary"], !boundary.isEmpty else { return "" }
            var html: String?
            for part in parts(body, boundary: boundary) {
                let (headers, content) = split(part)
                let fields = headerFields(headers)
                let (partType, _) = Self.contentType(fields["content-type"])
                if let disposition = fields["content-disposition"],
                    String(decoding: disposition, as: UTF8.self).lowercased().contains("attachment")
                {
                    continue
                }
                let text = bodyText(
                    content, contentType: fields["content-type"] ?? Array("text/plain".utf8),
                    transferEncoding: fields["content-transfer-encoding"], depth: depth + 1)
                if partType == "text/html" || (partType.hasPrefix("multipart/") && text.isEmpty) {
                    if html == nil, partType == "text/html" { html = text }
                    continue
                }
                if !text.isEmpty { return text }
            }
            return html ?? ""
        }
        guard type.hasPrefix("text/") || type.isEmpty else { return "" }
        let cte = transferEncoding.map { String(decoding: $0, as: UTF8.self).trimmed(newlines: false).lowercased() } ?? ""
        let decoded: [UInt8]
        switch cte {
        case "base64": decoded = base64(body)
        case "quoted-printable": decoded = quotedPrintable(body)
        default: decoded = body
        }
        let text = self.text(decoded, charset: params["charset"], cut: true)
        return type == "text/html" ? HTMLText.text(text) : text
    }

    static let maxDepth = 8

    /// The parts between `--boundary` lines (the last may be cut).
    static func parts(_ body: [UInt8], boundary: String) -> [[UInt8]] {
        let marker = Array("--\(boundary)".utf8)
        var result: [[UInt8]] = []
        var current: [UInt8]?
        for line in lines(body) {
            if line.starts(with: marker) {
                if let c = current { result.append(c) }
                let rest = line.dropFirst(marker.count)
                if rest.starts(with: [UInt8(ascii: "-"), UInt8(ascii: "-")]) { return result }
                current = []
                continue
            }
            current? += line + [13, 10]
        }
        if let c = current { result.append(c) }
        return result
    }

    /// A MIME part's header and content, at the first empty line.
    static func split(_ part: [UInt8]) -> ([UInt8], [UInt8]) {
        var k = 0
        while k < part.count {
            var end = k
            while end < part.count, part[end] != 10 { end += 1 }
            let blank = end == k || (end == k + 1 && part[k] == 13)
            if blank { return (Array(part[..<k]), end < part.count ? Array(part[(end + 1)...]) : []) }
            k = end + 1
        }
        return (part, [])
    }
}
