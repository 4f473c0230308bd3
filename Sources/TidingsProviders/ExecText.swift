import FoundationEssentials
import TidingsPluginAPI

extension ExecProvider {
    /// `format = "text"`: the whole output is one item (key `output`, kind `text`): `title` its
    /// first non-empty line, `body` the text, `data.text` the compared text (trailing blanks of
    /// each line and trailing empty lines dropped, so a stray newline is no change).
    package static func textItem(stdout: Data, name: String) -> Item {
        // Split on the byte: in a String, "\r\n" is one Character and no "\n".
        var lines = stdout.split(separator: 10, omittingEmptySubsequences: false).map { bytes in
            var s = Substring(String(decoding: bytes, as: UTF8.self))
            while let last = s.last, last == " " || last == "\t" || last == "\r" { s.removeLast() }
            return String(s)
        }
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        let text = lines.joined(separator: "\n")
        let first = lines.first { !$0.isEmpty }
        return Item(
            key: "output", kind: "text", title: first.map { FeedText.cut($0, PageProvider.maxTitle) } ?? "\(name) (no output)",
            body: FeedText.cut(text, PageProvider.maxBody),
            data: ["text": .string(FeedText.cut(text, PageProvider.maxText))], fingerprint: Fingerprint.of(["text", text]))
    }
}
