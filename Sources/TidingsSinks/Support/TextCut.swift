extension String {
    /// At most `bytes` UTF-8 bytes of the text, cut on a character boundary.
    package func prefix(utf8Bytes bytes: Int) -> String {
        guard utf8.count > bytes else { return self }
        var out = ""
        var used = 0
        for ch in self {
            let n = ch.utf8.count
            if used + n > bytes { break }
            out.append(ch)
            used += n
        }
        return out
    }

    /// At most `bytes` UTF-8 bytes, cut on a character boundary and then ending in "…", so a
    /// reader sees that something is missing. For a channel's length limit.
    package func cut(utf8Bytes bytes: Int) -> String {
        guard utf8.count > bytes else { return self }
        return prefix(utf8Bytes: bytes - "…".utf8.count) + "…"
    }
}
