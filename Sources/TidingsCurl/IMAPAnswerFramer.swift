/// Finds where the answer to one IMAP command ends, in the bytes as they arrive (RFC 3501 §7).
///
/// A response is a line, except that a line ending in a literal marker (`{n}`, `{n+}`, `~{n}`)
/// goes on after the n bytes that follow it. Those bytes are a message's text, or anyone's:
/// they are skipped unread, so nothing inside a literal is ever taken for a tagged completion,
/// a `* BYE` or another response. Only a response that starts with the command's tag ends the answer.
struct IMAPAnswerFramer {
    /// What ended the answer, or the session.
    enum End: Equatable {
        /// The tagged completion: `OK`, `NO` or `BAD` (upper-cased) and the text after it.
        case tagged(status: String, text: String)
        /// An untagged `* BYE` and its text: the server is closing the connection.
        case bye(String)
    }

    /// The tag and the space after it.
    private let tag: [UInt8]
    /// Everything received so far.
    private(set) var bytes: [UInt8] = []
    /// The next byte not yet looked at.
    private var next = 0
    /// Where the response being read starts, and where its current line (after a literal) starts.
    private var responseStart = 0
    private var lineStart = 0
    /// Bytes of a literal not yet received.
    private var literalLeft = 0
    /// Set once the answer or the session has ended; `bytes[..<length]` is the answer.
    private(set) var end: End?
    private(set) var length = 0

    init(tag: String) { self.tag = Array((tag + " ").utf8) }

    /// Takes received bytes; returns ``end`` once the answer (or the session) has ended.
    mutating func take(_ received: some Collection<UInt8>) -> End? {
        guard end == nil else { return end }
        bytes.append(contentsOf: received)
        while end == nil, next < bytes.count {
            if literalLeft > 0 {
                let step = min(literalLeft, bytes.count - next)
                next += step
                literalLeft -= step
                if literalLeft == 0 { lineStart = next }
                continue
            }
            guard let lf = bytes[next...].firstIndex(of: 10) else {
                next = bytes.count
                break
            }
            next = lf + 1
            if let n = Self.literalLength(bytes[lineStart..<lf]) {
                literalLeft = n
                lineStart = next
                continue
            }
            finish(responseStart..<next)
            responseStart = next
            lineStart = next
        }
        return end
    }

    /// A whole response (literals included) has arrived.
    private mutating func finish(_ range: Range<Int>) {
        let response = bytes[range]
        if response.starts(with: tag) {
            let rest = Self.text(response.dropFirst(tag.count))
            let status = rest.prefix(while: { $0 != " " })
            end = .tagged(status: status.uppercased(), text: String(rest.dropFirst(status.count).drop(while: { $0 == " " })))
            length = range.upperBound
        } else if response.starts(with: Array("* ".utf8)) {
            let rest = Self.text(response.dropFirst(2))
            let word = rest.prefix(while: { $0 != " " })
            if word.uppercased() == "BYE" {
                end = .bye(String(rest.dropFirst(word.count).drop(while: { $0 == " " })))
                length = range.upperBound
            }
        }
    }

    /// n, when `line` (without its LF) ends in a literal marker `{n}` or `{n+}` (CR optional).
    static func literalLength(_ line: ArraySlice<UInt8>) -> Int? {
        var end = line.endIndex
        if end > line.startIndex, line[end - 1] == 13 { end -= 1 }
        guard end > line.startIndex, line[end - 1] == UInt8(ascii: "}") else { return nil }
        end -= 1
        if end > line.startIndex, line[end - 1] == UInt8(ascii: "+") { end -= 1 }
        var start = end
        while start > line.startIndex, (48...57).contains(line[start - 1]), end - start < 10 { start -= 1 }
        guard start < end, start > line.startIndex, line[start - 1] == UInt8(ascii: "{") else { return nil }
        return line[start..<end].reduce(0) { $0 * 10 + Int($1 - 48) }
    }

    /// A response's text on one line: controls dropped, spaces at the ends trimmed.
    static func text(_ bytes: some Sequence<UInt8>) -> String {
        var out = ""
        for scalar in String(decoding: Array(bytes), as: UTF8.self).unicodeScalars where scalar.value >= 0x20 && scalar.value != 0x7f {
            out.unicodeScalars.append(scalar)
        }
        return String(out.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
