/// How urgent an event is. Sinks map it to their own notion (urgency, colour).
package enum Severity: String, Sendable, Codable, CaseIterable, Comparable {
    case info, warning, critical

    /// Lenient mapping of the words remote systems use ("error", "page", "crit" …).
    package init(lenient word: String?) {
        switch word?.lowercased() {
        case "critical", "crit", "error", "fatal", "page", "high", "major", "emergency", "alert":
            self = .critical
        case "warning", "warn", "minor", "medium":
            self = .warning
        default:
            self = .info
        }
    }

    private var rank: Int { self == .info ? 0 : self == .warning ? 1 : 2 }
    package static func < (a: Severity, b: Severity) -> Bool { a.rank < b.rank }
}

/// What happened to an item, or to a source's health.
package enum EventType: String, Sendable, Codable, CaseIterable {
    case new, changed, removed
    /// Source health (kind `source`): the source failed `error_threshold` times in a row.
    case error
    /// Source health: the first success after an `error` event.
    case recovered
    /// An item still present with severity warning or critical, through a route with
    /// `repeat_interval` (DESIGN §10).
    case reminder
}
