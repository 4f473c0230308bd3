/// Text from elsewhere (a remote server, a plugin, a config file) made safe to show on a
/// terminal: the one escaping function of every human-readable output (`check`, `history`,
/// `items`, `notices`, `outbox`, `sources`, diagnostics and log lines on stderr). JSON outputs
/// do not use it; the JSON writer escapes for JSON.
package enum TerminalText {
    /// One line that a terminal only displays:
    /// - runs of whitespace containing line breaks (`\n`, `\r`, U+2028/2029) or tabs become one
    ///   space, so a remote `\n` cannot forge a second output or log line;
    /// - control characters (C0, DEL, C1: an ESC or CSI could repaint, retitle or link the
    ///   terminal) and invisible format characters (bidi overrides and isolates that make
    ///   "txt.exe" read as "exe.txt", zero-width spaces, BOMs) become visible `\u{…}` escapes.
    ///
    /// Joiners (U+200C/U+200D), the soft hyphen and emoji tag characters are kept: they shape
    /// ordinary text and emoji and cannot reorder or hide it.
    package static func line(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        var spaces = 0  // the spaces of the whitespace run not written yet
        var runHasBreak = false  // ... and whether it holds a line break or tab
        for scalar in text.unicodeScalars {
            if scalar == " " {
                spaces += 1
                continue
            }
            if isLineBreakOrTab(scalar) {
                runHasBreak = true
                continue
            }
            if runHasBreak {
                if !out.isEmpty { out.append(" ") }
            } else if spaces > 0 {
                out += String(repeating: " ", count: spaces)
            }
            spaces = 0
            runHasBreak = false
            if needsEscape(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if !runHasBreak { out += String(repeating: " ", count: spaces) }
        return out
    }

    static func isLineBreakOrTab(_ s: Unicode.Scalar) -> Bool {
        s == "\n" || s == "\r" || s == "\t" || s == "\u{2028}" || s == "\u{2029}"
    }

    /// Whether `s` is shown as an escape rather than itself.
    package static func needsEscape(_ s: Unicode.Scalar) -> Bool {
        let v = s.value
        if v < 0x20 || (0x7F...0x9F).contains(v) { return true }
        if v < 0xA0 { return false }
        if s.properties.isBidiControl { return true }
        guard s.properties.generalCategory == .format else { return false }
        return !(s.properties.isJoinControl || v == 0xAD || (0xE0020...0xE007F).contains(v))
    }
}
