import FoundationEssentials

/// Cuts a channel's rendered text to the channel's documented length without breaking its markup:
/// never inside an HTML tag or entity (`&amp;`), a Slack link (`<url|label>`) or a Markdown
/// backslash escape, always on a character boundary, marked with "…", and for HTML with every
/// tag that was open closed again (so Telegram still parses it).
///
/// Lengths are counted in UTF-16 code units, the unit the chat services count in (it is never
/// less than the number of characters, so a cut text always fits).
package enum MarkupCutter {
    /// How a channel's text is read, and so what may not be split and what counts.
    package enum Syntax: Sendable {
        /// Telegram `parse_mode=HTML`: the limit counts visible text (after entity parsing), so
        /// tags count nothing and an entity counts as the one character it stands for.
        case telegramHTML
        /// Slack `mrkdwn`: `<…>` (links, mentions) and `&…;` are atoms; the raw text counts.
        case slackMrkdwn
        /// Markdown (Discord): a backslash escape is an atom; the raw text counts.
        case markdown
    }

    package static let ellipsis = "…"

    /// How long `text` is as the channel counts it.
    package static func width(_ text: String, syntax: Syntax) -> Int {
        Piece.split(text, syntax).reduce(0) { $0 + $1.width }
    }

    /// `text` if it fits in `limit`, else its longest unbroken prefix + "…" (+ closing tags).
    package static func cut(_ text: String, limit: Int, syntax: Syntax) -> String {
        let pieces = Piece.split(text, syntax)
        if pieces.reduce(0, { $0 + $1.width }) <= limit { return text }
        let budget = max(0, limit - ellipsis.utf16.count)
        var out = ""
        var used = 0
        var open: [String] = []
        for p in pieces {
            if p.width > 0 && used + p.width > budget { break }
            used += p.width
            out += p.text
            switch p.kind {
            case .open(let name): open.append(name)
            case .close(let name): if let i = open.lastIndex(of: name) { open.remove(at: i) }
            case .atom: break
            }
        }
        return out + ellipsis + open.reversed().map { "</\($0)>" }.joined()
    }

    /// One unsplittable piece of text: a character, an escape or entity, or a tag.
    struct Piece {
        enum Kind: Equatable { case atom, open(String), close(String) }
        var text: Substring
        var width: Int
        var kind: Kind = .atom

        static func split(_ text: String, _ syntax: Syntax) -> [Piece] {
            var pieces: [Piece] = []
            var i = text.startIndex
            while i < text.endIndex {
                let piece = next(text, at: i, syntax)
                pieces.append(piece)
                i = piece.text.endIndex
            }
            return pieces
        }

        private static func next(_ text: String, at i: String.Index, _ syntax: Syntax) -> Piece {
            let c = text[i]
            let one = text[i...i]
            switch (syntax, c) {
            case (.telegramHTML, "<"):
                guard let end = text[i...].firstIndex(of: ">") else { break }
                let tag = text[i...end]
                let closing = tag.hasPrefix("</")
                let name = tag.dropFirst(closing ? 2 : 1).prefix { $0.isLetter || $0.isNumber || $0 == "-" }.lowercased()
                return Piece(text: tag, width: 0, kind: closing ? .close(name) : .open(name))
            case (.telegramHTML, "&"), (.slackMrkdwn, "&"):
                guard let entity = entity(text, at: i) else { break }
                return Piece(text: entity, width: syntax == .telegramHTML ? 1 : entity.utf16.count)
            case (.slackMrkdwn, "<"):
                guard let end = text[i...].firstIndex(of: ">") else { break }
                return Piece(text: text[i...end], width: text[i...end].utf16.count)
            case (.markdown, "\\"):
                let after = text.index(after: i)
                guard after < text.endIndex else { break }
                let escape = text[i...after]
                return Piece(text: escape, width: escape.utf16.count)
            default:
                break
            }
            return Piece(text: one, width: one.utf16.count)
        }

        /// `&name;`, `&#123;` or `&#x1F;` starting at `i`.
        private static func entity(_ text: String, at i: String.Index) -> Substring? {
            var j = text.index(after: i)
            var n = 0
            while j < text.endIndex, n <= 10 {
                let c = text[j]
                if c == ";" { return n > 0 ? text[i...j] : nil }
                guard c.isASCII && (c.isLetter || c.isNumber || c == "#") else { return nil }
                j = text.index(after: j)
                n += 1
            }
            return nil
        }
    }
}
