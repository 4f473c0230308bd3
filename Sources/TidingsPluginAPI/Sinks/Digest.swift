import FoundationEssentials

/// Several deliveries to one sink sent as one message: the held ones when quiet hours end, or a
/// route's `group_wait` collection (DESIGN §10). Sinks that can show it as one message (email,
/// desktop summary, ntfy, Matrix, Telegram…) set ``Sink/rendersDigests``; the others get the
/// events one by one.
package struct Digest: Sendable {
    /// Why these were collected.
    package enum Reason: String, Sendable, Equatable {
        /// Held during a route's quiet hours, sent when the window ended.
        case quietHours = "quiet"
        /// Collected for a route's `group_wait`.
        case grouped = "group"
    }

    /// One line of a digest: everything that happened to one item (or one source's health)
    /// while the digest was collected.
    package struct Entry: Sendable, Equatable {
        /// How an item's events read together.
        package enum Summary: Sendable, Equatable {
            /// One event: it is shown as itself (`new`, `changed`, `removed`, `error`…).
            case single(EventType)
            /// Appeared and went again before the digest went out.
            case cameAndWent
            /// Several events, the item still there at the end: the first and the last.
            case sequence(first: EventType, last: EventType, count: Int)
        }
        /// The newest event of the item (its title, link and severity are shown).
        package var latest: Event
        /// Every event of the item in the digest, oldest first.
        package var events: [Event]
        package var summary: Summary
        /// The highest severity among the item's events.
        package var severity: Severity { events.map(\.severity).max() ?? latest.severity }

        /// `new`, `came and went`, `new, then changed (3 events)`.
        package var summaryText: String {
            switch summary {
            case .single(let t): return t.rawValue
            case .cameAndWent: return "came and went"
            case .sequence(let first, let last, let count): return "\(first.rawValue), then \(last.rawValue) (\(count) events)"
            }
        }
    }

    /// Stable for the same rows: a retried digest has the same id (idempotency key, Message-ID).
    package var id: String
    package var reason: Reason
    /// Every event, in the order they were queued.
    package var events: [Event]
    /// One per item (source and key), in the order each item first appeared.
    package var entries: [Entry]

    package init(id: String, reason: Reason, events: [Event]) {
        self.id = id
        self.reason = reason
        self.events = events
        self.entries = Self.entries(events)
    }

    /// Groups events by item; an item that was `new` and then `removed` is one "came and went"
    /// line, not two events.
    static func entries(_ events: [Event]) -> [Entry] {
        struct ItemKey: Hashable { var source: String, kind: String, key: String }
        var order: [ItemKey] = []
        var byItem: [ItemKey: [Event]] = [:]
        for e in events {
            let k = ItemKey(source: e.source, kind: e.kind, key: e.key)
            if byItem[k] == nil { order.append(k) }
            byItem[k, default: []].append(e)
        }
        return order.map { k in
            let list = byItem[k]!
            let summary: Entry.Summary
            if list.count == 1 {
                summary = .single(list[0].event)
            } else if list.first!.event == .new && list.last!.event == .removed {
                summary = .cameAndWent
            } else {
                summary = .sequence(first: list.first!.event, last: list.last!.event, count: list.count)
            }
            return Entry(latest: list.last!, events: list, summary: summary)
        }
    }

    /// A one-line heading: `12 events from helpdesk, sportdate (held for quiet hours)`.
    package var title: String {
        let sources = Array(Set(events.map(\.source))).sorted()
        let named = sources.count <= 3 ? sources.joined(separator: ", ") : sources.prefix(3).joined(separator: ", ") + " and \(sources.count - 3) more"
        let why = reason == .quietHours ? "held for quiet hours" : "grouped"
        return "\(events.count) event\(events.count == 1 ? "" : "s") from \(named) (\(why))"
    }

    /// The highest severity of any event.
    package var severity: Severity { events.map(\.severity).max() ?? .info }
}
