import FoundationEssentials
import TidingsPluginAPI

/// An item the latest successful poll of a source saw (what is "wrong right now").
package struct CurrentItem: Sendable {
    package var source: String
    package var item: Item
    package var firstSeen: Date
    package var changedAt: Date
    /// Gone from the latest snapshot but still within `flap_window` (no `removed` event yet).
    package var missing: Bool

    /// One line of JSON (`tidings items --json`).
    package func jsonLine() -> String { jsonText() }
}

extension CurrentItem: JSONObjectShape {
    package enum Member: String, CaseIterable {
        case body
        case changedAt = "changed_at"
        case data
        case firstSeen = "first_seen"
        case key, kind, missing, severity, source, title, url
    }

    package func value(of member: Member) -> JSONValue? {
        switch member {
        case .body: return .string(item.body)
        case .changedAt: return .string(Timestamp.format(changedAt))
        case .data: return item.data
        case .firstSeen: return .string(Timestamp.format(firstSeen))
        case .key: return .string(item.key)
        case .kind: return .string(item.kind)
        case .missing: return .bool(missing)
        case .severity: return .string(item.severity.rawValue)
        case .source: return .string(source)
        case .title: return .string(item.title)
        case .url: return item.url.map(JSONValue.string) ?? .null
        }
    }
}

extension StateStore {
    /// The items a source currently has (present, or missing within the flap window), in key order.
    package func currentItems(source: String) throws -> [CurrentItem] {
        try database.read { db in
            try PollRecorder.items(db, source: source).values
                .filter { $0.state != .gone }
                .sorted { ($0.firstSeen, $0.key) < ($1.firstSeen, $1.key) }
                .map { CurrentItem(source: source, item: $0.item, firstSeen: $0.firstSeen, changedAt: $0.changedAt, missing: $0.state == .missing) }
        }
    }
}
