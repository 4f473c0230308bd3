import FoundationEssentials
import TidingsPluginAPI

/// An item as the state remembers it.
///
/// Its content is kept as the stored JSON until someone needs it: de-duplicating an
/// unchanged snapshot compares fingerprints only and decodes nothing.
package struct StoredItem: Sendable, Equatable {
    package enum State: String, Sendable {
        /// Seen in the latest snapshot.
        case present
        /// Gone from the snapshot, but within `flap_window`: no `removed` event yet.
        case missing
        /// `removed` was emitted (or it vanished during a baseline); if it returns, it is new again.
        case gone
    }

    enum Content: Sendable, Equatable {
        case item(Item)
        case json(kind: String, snapshot: String)
    }

    package var key: String
    package var fingerprint: String
    /// The stored content's hash (``Item/contentHash``): with a custom fingerprint, a poll
    /// whose item has another one brings new text without a change (the row is refreshed).
    package var contentHash: String
    package var state: State
    package var firstSeen: Date
    package var changedAt: Date
    package var missingSince: Date?
    var content: Content

    package init(item: Item, state: State, firstSeen: Date, changedAt: Date, missingSince: Date? = nil) {
        self.key = item.key
        self.fingerprint = item.fingerprint
        self.contentHash = item.contentHash
        self.state = state
        self.firstSeen = firstSeen
        self.changedAt = changedAt
        self.missingSince = missingSince
        self.content = .item(item)
    }

    /// A stored row; `contentHash` nil means the same as the fingerprint (rows store it only
    /// when it differs, and rows from before it was stored do not have it).
    init(
        key: String, kind: String, fingerprint: String, contentHash: String?, state: State, firstSeen: Date, changedAt: Date,
        missingSince: Date?, snapshot: String
    ) {
        self.key = key
        self.fingerprint = fingerprint
        self.contentHash = contentHash ?? fingerprint
        self.state = state
        self.firstSeen = firstSeen
        self.changedAt = changedAt
        self.missingSince = missingSince
        self.content = .json(kind: kind, snapshot: snapshot)
    }

    /// The item's content (decoded from state on first use).
    package var item: Item {
        switch content {
        case .item(let i): return i
        case .json(let kind, let json):
            let snap = ItemSnapshot(stored: json) ?? ItemSnapshot(Item(key: key, kind: kind, title: key))
            return snap.item(key: key, fingerprint: fingerprint)
        }
    }

    var kind: String {
        switch content {
        case .item(let i): return i.kind
        case .json(let kind, _): return kind
        }
    }

    /// The JSON stored in the `snapshot` column.
    var snapshotJSON: String {
        switch content {
        case .json(_, let s): return s
        case .item(let i): return ItemSnapshot(i).jsonText()
        }
    }

    /// The same stored content in another state.
    func with(state: State, changedAt: Date, missingSince: Date?) -> StoredItem {
        var copy = self
        copy.state = state
        copy.changedAt = changedAt
        copy.missingSince = missingSince
        return copy
    }
}

/// The stored form of an item's content (the `snapshot` column).
struct ItemSnapshot {
    var kind: String
    var title: String
    package var body: String
    var url: String?
    var severity: Severity
    var data: JSONValue
    var expiresAt: Date?

    init(_ i: Item) {
        kind = i.kind
        title = i.title
        body = i.body
        url = i.url
        severity = i.severity
        data = i.data
        expiresAt = i.expiresAt
    }

    /// Reads ``jsonText()`` back; nil when the stored text is not such an object.
    init?(stored text: String) {
        guard let o = try? JSONMembers<Member>(parsing: text, what: "item"),
            let kind = try? o.string(.kind), let title = try? o.string(.title), let body = try? o.string(.body)
        else { return nil }
        self.kind = kind
        self.title = title
        self.body = body
        url = o[.url]?.stringValue
        severity = o[.severity]?.stringValue.flatMap(Severity.init(rawValue:)) ?? .info
        data = o[.data] ?? .object([:])
        expiresAt = o[.expiresAt]?.doubleValue.map(Date.init(timeIntervalSinceReferenceDate:))
    }

    func item(key: String, fingerprint: String) -> Item {
        Item(key: key, kind: kind, title: title, body: body, url: url, severity: severity, data: data, expiresAt: expiresAt, fingerprint: fingerprint)
    }
}

/// The stored text, as `JSONEncoder` with sorted keys wrote it when this was `Codable`:
/// optional members left out when nil, `expiresAt` as seconds since 2001.
extension ItemSnapshot: JSONObjectShape {
    package enum Member: String, CaseIterable {
        case body, data, expiresAt, kind, severity, title, url
    }

    package func value(of member: Member) -> JSONValue? {
        switch member {
        case .body: return .string(body)
        case .data: return data
        case .expiresAt: return expiresAt.map { .number($0.timeIntervalSinceReferenceDate) }
        case .kind: return .string(kind)
        case .severity: return .string(severity.rawValue)
        case .title: return .string(title)
        case .url: return url.map(JSONValue.string)
        }
    }
}
