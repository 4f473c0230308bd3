import Foundation

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
