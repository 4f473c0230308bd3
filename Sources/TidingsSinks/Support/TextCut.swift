/// Cutting text to a channel's documented length limit.
enum TextCut {
    /// What ends a cut text.
    static let ellipsis = "…"

    /// `text` in at most `bytes` UTF-8 bytes, cut on a character boundary and ending in "…" when
    /// it was cut (the ellipsis counts towards the limit).
    static func cut(_ text: String, toBytes bytes: Int) -> String {
        guard text.utf8.count > bytes else { return text }
        var out = ""
        var used = ellipsis.utf8.count
        for ch in text {
            used += ch.utf8.count
            if used > bytes { break }
            out.append(ch)
        }
        return out + ellipsis
    }
}
