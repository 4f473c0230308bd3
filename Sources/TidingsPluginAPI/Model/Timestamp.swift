import FoundationEssentials

/// RFC 3339 UTC timestamps, as used in event JSON and remote APIs.
package enum Timestamp {
    package static func format(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false).timeZone(separator: .omitted))
            .replacingScalars("+0000", with: "Z")
    }

    /// Parses `2026-11-22T10:00:00Z`, with or without fractional seconds or an offset,
    /// and plain dates (`2026-11-22`).
    package static func parse(_ text: String) -> Date? {
        if let d = try? Date(text, strategy: .iso8601) { return d }
        if let d = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return d }
        if text.count == 10, let d = try? Date(text + "T00:00:00Z", strategy: .iso8601) { return d }
        return nil
    }
}
