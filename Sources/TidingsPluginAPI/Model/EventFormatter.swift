import FoundationEssentials
import Glibc

/// Renders events for people: one readable line each (`check`, the stdout sink).
package struct EventFormatter: Sendable {
    package var color: Bool

    package init(color: Bool) { self.color = color }

    /// Colour only on a terminal, and never when `NO_COLOR` is set (no-color.org).
    package static func wantsColor(fileDescriptor: Int32, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        isatty(fileDescriptor) == 1 && environment["NO_COLOR"].map(\.isEmpty) ?? true && environment["TERM"] != "dumb"
    }

    /// `2026-11-22 10:00:00  critical  helpdesk  new  Disk almost full on db1 — /var is 97% full  <url>`
    ///
    /// The time is local (what a person at the terminal expects). Remote text goes through
    /// ``TerminalText/line(_:)``: control and bidi characters become visible `\u{…}` escapes,
    /// line breaks and tabs become spaces.
    package func line(_ e: Event) -> String {
        var parts = [
            dim(Self.localTime(e.observedAt)), paint(e.severity.rawValue + String(repeating: " ", count: max(0, 8 - e.severity.rawValue.count)), e.severity),
            bold(TerminalText.line(e.source)), e.event.rawValue, TerminalText.line(e.title),
        ]
        let body = TerminalText.line(e.body)
        if !body.isEmpty { parts.append("— " + (body.count > 160 ? String(body.prefix(159)) + "…" : body)) }
        if let url = e.url, !url.isEmpty { parts.append(dim("<\(TerminalText.line(url))>")) }
        return parts.joined(separator: "  ")
    }

    /// `yyyy-MM-dd HH:mm:ss` in the local time zone (`TZ`).
    package static func localTime(_ date: Date, timeZone: Zone = .current) -> String {
        timeZone.civil(at: date).description
    }

    private func paint(_ s: String, _ sev: Severity) -> String {
        guard color else { return s }
        switch sev {
        case .critical: return "\u{1B}[1;31m\(s)\u{1B}[0m"
        case .warning: return "\u{1B}[33m\(s)\u{1B}[0m"
        case .info: return "\u{1B}[36m\(s)\u{1B}[0m"
        }
    }

    private func bold(_ s: String) -> String { color ? "\u{1B}[1m\(s)\u{1B}[0m" : s }
    private func dim(_ s: String) -> String { color ? "\u{1B}[2m\(s)\u{1B}[0m" : s }
}
