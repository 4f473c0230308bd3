import FoundationEssentials

/// `tidings import urls FILE`: one address per line; blank lines and lines starting with `#`
/// are skipped, and so is a `# comment` after the address. Each address then goes through
/// `add`'s discovery (``AddressLookup``), which the command runs.
package enum URLListReader {
    /// The addresses with their lines, and the lines that hold more than one word.
    package static func addresses(_ text: [UInt8]) -> (addresses: [(address: String, line: Int)], notImportable: [NotImportable]) {
        var out: [(String, Int)] = []
        var refused: [NotImportable] = []
        // Split on the byte: in a String, "\r\n" is one Character and no "\n".
        for (i, bytes) in text.split(separator: 10, omittingEmptySubsequences: false).enumerated() {
            let raw = String(decoding: bytes, as: UTF8.self)
            let words = raw.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = words.first, !first.hasPrefix("#") else { continue }
            if words.count > 1, !words[1].hasPrefix("#") {
                refused.append(NotImportable(what: String(first), line: i + 1, reason: "one address per line (then a # comment, if any)"))
                continue
            }
            out.append((String(first), i + 1))
        }
        return (out, refused)
    }
}
