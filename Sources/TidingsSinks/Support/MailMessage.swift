import FoundationEssentials
import Glibc
import TidingsPOSIX
import TidingsPluginAPI

/// An e-mail address as the `email` sink accepts it: `user@example.org` or
/// `Display Name <user@example.org>`.
///
/// Only what every SMTP server takes: a dot-atom local part (no quoted local parts), a domain
/// of letters, digits and hyphens (IDNs in their `xn--` form) or an address literal, ASCII.
/// CR, LF and every other control character are refused anywhere, so no header can be injected.
package struct MailAddress: Sendable, Equatable, CustomStringConvertible {
    /// The addr-spec, `user@example.org`: the SMTP envelope address.
    package var address: String
    /// The display name, if any (any Unicode text; RFC 2047-encoded in headers when not ASCII).
    package var name: String?

    package init(address: String, name: String? = nil) {
        self.address = address
        self.name = name
    }

    /// Parses and validates `text`; the error says what is wrong, for a config message.
    package init(parsing text: String) throws(MailAddressError) {
        if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw MailAddressError("must not contain line breaks or control characters")
        }
        let trimmed = text.trimmed(newlines: false)
        if let open = trimmed.lastIndex(of: "<") {
            guard trimmed.hasSuffix(">") else { throw MailAddressError("'<' without a closing '>' at the end") }
            var name = trimmed[..<open].trimmed(newlines: false)
            if name.count >= 2, name.hasPrefix("\""), name.hasSuffix("\"") { name = String(name.dropFirst().dropLast()) }
            guard name.count <= 200 else { throw MailAddressError("the display name is longer than 200 characters") }
            guard !name.contains("\"") && !name.contains("\\") && !name.contains("<") else {
                throw MailAddressError("the display name must not contain '\"', '\\' or '<'")
            }
            let spec = String(trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)])
            try Self.validate(spec)
            self.init(address: spec, name: name.isEmpty ? nil : name)
        } else {
            try Self.validate(trimmed)
            self.init(address: trimmed)
        }
    }

    /// `letters digits ! # $ % & ' * + - / = ? ^ _ ` { | } ~`: RFC 5322's atext.
    static func isAtext(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-/=?^_`{|}~".utf8.contains(c)
        }
    }

    /// A letter, digit or hyphen: what a domain label is made of.
    static func isLabelByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// Checks an addr-spec.
    static func validate(_ spec: String) throws(MailAddressError) {
        guard spec.unicodeScalars.allSatisfy({ $0.isASCII }) else {
            throw MailAddressError("\"\(spec)\" is not ASCII (SMTPUTF8 addresses are not supported; write a domain in its xn-- form)")
        }
        guard spec.utf8.count <= 254 else { throw MailAddressError("\"\(spec)\" is longer than 254 characters") }
        guard let at = spec.lastIndex(of: "@") else { throw MailAddressError("\"\(spec)\" has no '@'") }
        let local = spec[..<at]
        let domain = spec[spec.index(after: at)...]
        let dotAtom = local.split(separator: ".", omittingEmptySubsequences: false)
        guard !local.isEmpty, local.utf8.count <= 64, dotAtom.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(isAtext) }) else {
            throw MailAddressError("\"\(spec)\": the part before '@' must be 1 to 64 letters, digits or !#$%&'*+-/=?^_`{|}~, with single dots between them")
        }
        if domain.hasPrefix("[") {
            let literal = domain.dropFirst().dropLast().utf8
            guard domain.hasSuffix("]"), !literal.isEmpty, literal.allSatisfy({ $0 > 32 && $0 < 127 && !"[]\\".utf8.contains($0) }) else {
                throw MailAddressError("\"\(spec)\": invalid address literal after '@'")
            }
            return
        }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        let valid =
            !domain.isEmpty
            && labels.allSatisfy { label in
                label.utf8.count <= 63 && !label.isEmpty && !label.hasPrefix("-") && !label.hasSuffix("-")
                    && label.utf8.allSatisfy(isLabelByte)
            }
        guard valid else { throw MailAddressError("\"\(spec)\": the domain must be labels of letters, digits and '-' separated by dots") }
    }

    /// The domain after the '@' (lower-cased), or nil for an address literal.
    package var domain: String? {
        guard let at = address.lastIndex(of: "@") else { return nil }
        let d = address[address.index(after: at)...]
        return d.hasPrefix("[") ? nil : d.lowercased()
    }

    /// The address as header tokens: `user@example.org`, or the display name's words (quoted, or
    /// RFC 2047-encoded when not ASCII) then `<user@example.org>`.
    package var headerTokens: [String] {
        guard let name else { return [address] }
        let phrase: [String]
        if name.unicodeScalars.allSatisfy({ $0.isASCII }) {
            let words = name.split(separator: " ").map(String.init)
            phrase =
                words.allSatisfy({ $0.utf8.allSatisfy(Self.isAtext) && $0.count <= MailHeader.plainWordLimit })
                ? words : ["\"" + name + "\""]
        } else {
            phrase = MailHeader.encodedWords(name)
        }
        return phrase + ["<\(address)>"]
    }

    package var description: String { name.map { "\($0) <\(address)>" } ?? address }
}

/// Why an address was refused.
package struct MailAddressError: Error, CustomStringConvertible, Equatable {
    package var description: String
    init(_ description: String) { self.description = description }
}

/// Header fields as RFC 5322 and RFC 2047 want them: folded before 78 characters, non-ASCII
/// text as `=?UTF-8?B?…?=` encoded-words of at most 75 characters, each holding whole characters.
package enum MailHeader {
    /// The line length to fold before (RFC 5322 §2.1.1's "SHOULD": 78; the hard limit is 998).
    static let lineLimit = 78
    /// The longest encoded-word, and the longest line holding one (RFC 2047 §2).
    static let encodedWordLimit = 75
    static let encodedLineLimit = 76
    /// A plain ASCII word longer than this is encoded instead, so folding always fits.
    static let plainWordLimit = 70

    /// `Name: token token…`, folded (CRLF + space) before a token that would pass the limit.
    package static func fold(_ name: String, _ tokens: [String]) -> String {
        var out = name + ":"
        var line = out.count
        for (i, token) in tokens.enumerated() {
            if i > 0 && line + 1 + token.count > lineLimit {
                out += "\r\n " + token
                line = 1 + token.count
            } else {
                out += " " + token
                line += 1 + token.count
            }
        }
        return out
    }

    /// An unstructured field (`Subject`, `X-Tidings-Source`): line breaks and other controls
    /// become spaces; plain words when the text is printable ASCII (and has no `=?` that would
    /// read as an encoded-word), else encoded-words.
    package static func unstructured(_ name: String, _ text: String) -> String {
        var clean = ""
        for s in text.unicodeScalars { clean.unicodeScalars.append(s.properties.generalCategory == .control ? " " : s) }
        let words = clean.split(separator: " ").map(String.init)
        let plain =
            clean.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7f } && !clean.contains("=?")
            && words.allSatisfy { $0.count <= plainWordLimit }
        let firstRoom = encodedLineLimit - name.count - 2
        return fold(name, plain ? words : encodedWords(clean.trimmed(newlines: false), firstRoom: firstRoom))
    }

    /// `text` as B-encoded UTF-8 encoded-words, split between characters (a character too long
    /// for one word, between its Unicode scalars), the first at most `firstRoom` long.
    package static func encodedWords(_ text: String, firstRoom: Int = encodedWordLimit) -> [String] {
        let prefix = "=?UTF-8?B?"
        let suffix = "?="
        func length(_ bytes: Int) -> Int { prefix.count + suffix.count + (bytes + 2) / 3 * 4 }
        var words: [String] = []
        var chunk: [UInt8] = []
        func room() -> Int { min(words.isEmpty ? max(firstRoom, length(4)) : encodedWordLimit, encodedWordLimit) }
        func flush() {
            guard !chunk.isEmpty else { return }
            words.append(prefix + Data(chunk).base64EncodedString() + suffix)
            chunk.removeAll()
        }
        func add(_ piece: [UInt8]) {
            if length(chunk.count + piece.count) > room() { flush() }
            chunk += piece
        }
        for character in text {
            let bytes = Array(String(character).utf8)
            if length(bytes.count) <= room() {
                add(bytes)
            } else {
                for scalar in character.unicodeScalars { add(Array(String(scalar).utf8)) }
            }
        }
        flush()
        return words.isEmpty ? [prefix + suffix] : words
    }

    /// The RFC 5322 date-time, in UTC: `Tue, 03 Feb 2026 10:00:00 +0000`.
    package static func date(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(tm.tm_wday)]), \(two(tm.tm_mday)) \(months[Int(tm.tm_mon)]) \(tm.tm_year + 1900) "
            + "\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec)) +0000"
    }
}

/// Quoted-printable (RFC 2045 §6.7) for UTF-8 text: readable where it is ASCII, lines of at
/// most 76 characters (soft breaks `=`), CRLF hard breaks, trailing white space encoded.
package enum QuotedPrintable {
    static let lineLimit = 76

    package static func encode(_ text: String) -> String {
        var out = ""
        let lines = text.replacingScalars("\r\n", with: "\n").replacingScalars("\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        for (i, line) in lines.enumerated() {
            if i > 0 { out += "\r\n" }
            let bytes = Array(line.utf8)
            var width = 0
            for (j, b) in bytes.enumerated() {
                let last = j == bytes.count - 1
                let literal = (b >= 33 && b <= 126 && b != UInt8(ascii: "=")) || ((b == 32 || b == 9) && !last)
                let token = literal ? String(UnicodeScalar(b)) : "=" + hex(b)
                // A soft break keeps the line (with its trailing "=") within the limit.
                if width + token.count > lineLimit - (last ? 0 : 1) {
                    out += "=\r\n"
                    width = 0
                }
                out += token
                width += token.count
            }
        }
        return out
    }

    private static func hex(_ b: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(b >> 4)], digits[Int(b & 15)]])
    }
}

/// One notification e-mail: what the `email` sink sends for one event.
package struct MailMessage: Sendable {
    package var from: MailAddress
    package var to: [MailAddress]
    package var subject: String
    package var date: Date
    /// Without angle brackets: `01JD….sinkname@example.org`.
    package var messageID: String
    package var text: String
    /// When set, the message is multipart/alternative: the text, then this HTML.
    package var html: String?
    /// More header fields (name, unstructured value), after the standard ones.
    package var extraHeaders: [(String, String)]

    package init(
        from: MailAddress, to: [MailAddress], subject: String, date: Date, messageID: String, text: String,
        html: String? = nil, extraHeaders: [(String, String)] = []
    ) {
        self.from = from
        self.to = to
        self.subject = subject
        self.date = date
        self.messageID = messageID
        self.text = text
        self.html = html
        self.extraHeaders = extraHeaders
    }

    /// The Message-ID for one event through one sink: the same on every retry, so a receiver (or
    /// a person) recognises a retried message, and different per sink. Right of '@': the
    /// sender's domain (RFC 5322 §3.6.4's advice), else `tidings.invalid`.
    package static func messageID(eventID: String, sink: String, from: MailAddress) -> String {
        func atom(_ s: String) -> String {
            String(decoding: s.utf8.map { c in MailAddress.isAtext(c) && c != UInt8(ascii: "/") ? c : UInt8(ascii: "_") }, as: UTF8.self)
        }
        return "\(atom(eventID)).\(atom(sink))@\(from.domain ?? "tidings.invalid")"
    }

    /// The boundary between the parts of a multipart message. `=_` never occurs in
    /// quoted-printable text (`=` is always followed by hex digits or a line break there).
    var boundary: String { "=_tidings_" + messageID.prefix(while: { $0 != "@" }) }

    /// The RFC 5322 message, CRLF line endings (libcurl dot-stuffs it on the wire).
    package func rfc5322() -> Data {
        var h = [
            MailHeader.fold("Date", [MailHeader.date(date)]),
            MailHeader.fold("From", from.headerTokens),
            MailHeader.fold("To", Self.list(to)),
            MailHeader.unstructured("Subject", subject),
            MailHeader.fold("Message-ID", ["<\(messageID)>"]),
            "MIME-Version: 1.0",
        ]
        h += extraHeaders.map { MailHeader.unstructured($0.0, $0.1) }
        var body: String
        if let html {
            h.append("Content-Type: multipart/alternative; boundary=\"\(boundary)\"")
            body = "This is a message in MIME format.\r\n"
            for (type, content) in [("text/plain", text), ("text/html", html)] {
                body += "\r\n--\(boundary)\r\n" + Self.partHeaders(type).joined(separator: "\r\n") + "\r\n\r\n" + QuotedPrintable.encode(content)
            }
            body += "\r\n--\(boundary)--\r\n"
        } else {
            h += Self.partHeaders("text/plain")
            body = QuotedPrintable.encode(text) + "\r\n"
        }
        return Data((h.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8)
    }

    static func partHeaders(_ type: String) -> [String] {
        ["Content-Type: \(type); charset=utf-8", "Content-Transfer-Encoding: quoted-printable"]
    }

    /// Address tokens separated by commas.
    static func list(_ addresses: [MailAddress]) -> [String] {
        addresses.enumerated().flatMap { i, a -> [String] in
            var tokens = a.headerTokens
            if i < addresses.count - 1 { tokens[tokens.count - 1] += "," }
            return tokens
        }
    }
}
