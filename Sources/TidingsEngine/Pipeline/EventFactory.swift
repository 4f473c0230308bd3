import FoundationEssentials
import TidingsPluginAPI

/// Turns de-duplication changes and source health into ``Event``s.
enum EventFactory {
    static func event(source: SourceConfig, change: Deduplicator.Change, firstSeen: Date, now: Date) -> Event {
        let item = change.item
        var data = item.data
        if change.type == .changed, let prev = change.previous {
            var changes: [String: JSONValue] = [:]
            if prev.title != item.title { changes["title"] = ["old": .string(prev.title), "new": .string(item.title)] }
            if prev.body != item.body { changes["body"] = ["old": .string(prev.body), "new": .string(item.body)] }
            if prev.severity != item.severity { changes["severity"] = ["old": .string(prev.severity.rawValue), "new": .string(item.severity.rawValue)] }
            if case .object(let new) = item.data, case .object(let old) = prev.data {
                for k in Set(new.keys).union(old.keys).sorted() where new[k] != old[k] {
                    changes[k] = ["old": old[k] ?? .null, "new": new[k] ?? .null]
                }
            }
            if case .object(var o) = data {
                o["changes"] = .object(changes)
                if change.flapped { o["flapped"] = true }
                data = .object(o)
            }
        }
        var event = Event(
            source: source.name, provider: source.provider, kind: item.kind, event: change.type, key: item.key,
            title: item.title, body: item.body, url: item.url, severity: item.severity, observedAt: now, data: data)
        if let describer = source.instance as? EventDescriber {
            describer.describe(&event, change: change, firstSeen: firstSeen)
        }
        event.title = Redactor.shared.scrub(event.title)
        event.body = Redactor.shared.scrub(event.body)
        return event
    }

    /// One event in place of a poll's `changes` when there are more than `max_events`
    /// (DESIGN §4 shape; README, Reliability: Floods). It counts them by type in its title and `data`,
    /// and takes the kind and type they share (else `source` / `changed`) and the highest
    /// severity, so that routes send it where the events themselves would have gone.
    static func summary(source: SourceConfig, changes: [Deduplicator.Change], now: Date) -> Event {
        var counts: [EventType: Int] = [:]
        for c in changes { counts[c.type, default: 0] += 1 }
        let kinds = Set(changes.lazy.map(\.item.kind))
        let byType = EventType.allCases.compactMap { t in counts[t].map { "\($0) \(t.rawValue)" } }.joined(separator: ", ")
        let limit = source.settings.maxEvents
        return Event(
            source: source.name, provider: source.provider, kind: kinds.count == 1 ? kinds.first! : "source",
            event: counts.count == 1 ? counts.first!.key : .changed, key: source.name,
            title: "\(source.name): \(changes.count) events in one poll (\(byType)), over max_events = \(limit)",
            body: "Not sent one by one: this summary stands for them. The state is up to date (`tidings items \(source.name)`).",
            url: nil, severity: changes.map(\.item.severity).max() ?? .info, observedAt: now,
            data: [
                "summary": [
                    "events": .number(Double(changes.count)), "max_events": .number(Double(limit)),
                    "by_type": .object(Dictionary(uniqueKeysWithValues: counts.map { ($0.key.rawValue, .number(Double($0.value))) })),
                ]
            ])
    }

    static func health(source: SourceConfig, type: EventType, message: String, failures: Int, now: Date, auth: Bool = false) -> Event {
        let title: String
        switch type {
        case .recovered: title = "\(source.name): recovered"
        default: title = auth ? "\(source.name): credentials rejected" : "\(source.name): polling failed"
        }
        return Event(
            source: source.name, provider: source.provider, kind: "source", event: type, key: source.name,
            title: title, body: Redactor.shared.scrub(message), url: nil,
            severity: type == .recovered ? .info : (auth ? .critical : .warning), observedAt: now,
            data: ["failures": .number(Double(failures)), "auth_failed": .bool(auth)])
    }
}
