import FoundationEssentials

/// The one event shape used everywhere: stdout `--json`, webhook bodies, the exec sink's stdin.
///
/// Field names are the external contract (DESIGN §4).
package struct Event: Sendable, Equatable {
    /// Unique per event, stable across redeliveries.
    package var id: String
    package var source: String
    package var provider: String
    package var kind: String
    package var event: EventType
    package var key: String
    package var title: String
    package var body: String
    package var url: String?
    package var severity: Severity
    package var observedAt: Date
    package var data: JSONValue

    package init(
        id: String = EventID.make(), source: String, provider: String, kind: String, event: EventType,
        key: String, title: String, body: String = "", url: String? = nil, severity: Severity = .info,
        observedAt: Date, data: JSONValue = .object([:])
    ) {
        self.id = id
        self.source = source
        self.provider = provider
        self.kind = kind
        self.event = event
        self.key = key
        self.title = title
        self.body = body
        self.url = url
        self.severity = severity
        self.observedAt = observedAt
        self.data = data
    }

    /// The members of the event's JSON object (DESIGN §4), in key order.
    package enum Member: String, CaseIterable {
        case body, data, event, id, key, kind
        case observedAt = "observed_at"
        case provider, severity, source, title, url
    }

    /// One line of compact JSON (no trailing newline), keys sorted. Never fails: every
    /// `data` can be written (see ``CompactJSONWriter``).
    package func jsonLine() -> String { jsonText(capacity: 512) }

    /// The same members as a ``JSONValue`` (`data` shared, not copied): message templates' context.
    package var jsonObject: JSONValue { jsonValue }

    /// Reads an event back from ``jsonLine()`` text (the stored form): required fields,
    /// known event type and severity, a valid timestamp.
    package static func decode(jsonLine: String) throws(JSONParseError) -> Event {
        let o = try JSONMembers<Member>(parsing: jsonLine, what: "event")
        let typeName = try o.string(.event)
        guard let type = EventType(rawValue: typeName) else { throw JSONParseError(message: "event: unknown 'event' type '\(typeName)'") }
        let severity =
            try o.optionalString(.severity).map { s throws(JSONParseError) in
                guard let v = Severity(rawValue: s) else { throw JSONParseError(message: "event: unknown severity '\(s)'") }
                return v
            } ?? .info
        let stamp = try o.string(.observedAt)
        guard let observedAt = Timestamp.parse(stamp) else { throw JSONParseError(message: "event: bad timestamp \(stamp)") }
        let data: JSONValue
        switch o[.data] {
        case nil, .null?: data = .object([:])
        case let v?: data = v
        }
        return Event(
            id: try o.string(.id), source: try o.string(.source), provider: try o.string(.provider), kind: try o.string(.kind),
            event: type, key: try o.string(.key), title: try o.string(.title), body: try o.optionalString(.body) ?? "",
            url: try o.optionalString(.url), severity: severity, observedAt: observedAt, data: data)
    }
}

extension Event: JSONObjectShape {
    package func value(of member: Member) -> JSONValue? {
        switch member {
        case .body: return .string(body)
        case .data: return data
        case .event: return .string(event.rawValue)
        case .id: return .string(id)
        case .key: return .string(key)
        case .kind: return .string(kind)
        case .observedAt: return .string(Timestamp.format(observedAt))
        case .provider: return .string(provider)
        case .severity: return .string(severity.rawValue)
        case .source: return .string(source)
        case .title: return .string(title)
        case .url: return url.map(JSONValue.string) ?? .null  // null when absent: a stable shape for jq
        }
    }
}
