import Foundation

/// The one event shape used everywhere: stdout `--json`, webhook bodies, the exec sink's stdin.
///
/// Field names are the external contract (DESIGN §4).
public struct Event: Sendable, Equatable, Encodable {
    /// Unique per event, stable across redeliveries.
    public var id: String
    public var source: String
    public var provider: String
    public var kind: String
    public var event: EventType
    public var key: String
    public var title: String
    public var body: String
    public var url: String?
    public var severity: Severity
    public var observedAt: Date
    public var data: JSONValue

    public init(
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

    enum CodingKeys: String, CodingKey {
        case id, source, provider, kind, event, key, title, body, url, severity
        case observedAt = "observed_at"
        case data
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(source, forKey: .source)
        try c.encode(provider, forKey: .provider)
        try c.encode(kind, forKey: .kind)
        try c.encode(event, forKey: .event)
        try c.encode(key, forKey: .key)
        try c.encode(title, forKey: .title)
        try c.encode(body, forKey: .body)
        try c.encode(url, forKey: .url)  // null when absent: a stable shape for jq
        try c.encode(severity, forKey: .severity)
        try c.encode(Timestamp.format(observedAt), forKey: .observedAt)
        try c.encode(data, forKey: .data)
    }

    /// One line of compact JSON (no trailing newline), keys sorted; the same bytes as
    /// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` would write.
    public func jsonLine() -> String {
        var w = CompactJSONWriter(capacity: 512)
        w.append(byte: UInt8(ascii: "{"))
        w.write(key: "body", first: true); w.write(string: body)
        w.write(key: "data", first: false)
        do { try w.write(data, depth: 1) } catch { return "{}" }
        w.write(key: "event", first: false); w.write(string: event.rawValue)
        w.write(key: "id", first: false); w.write(string: id)
        w.write(key: "key", first: false); w.write(string: key)
        w.write(key: "kind", first: false); w.write(string: kind)
        w.write(key: "observed_at", first: false); w.write(string: Timestamp.format(observedAt))
        w.write(key: "provider", first: false); w.write(string: provider)
        w.write(key: "severity", first: false); w.write(string: severity.rawValue)
        w.write(key: "source", first: false); w.write(string: source)
        w.write(key: "title", first: false); w.write(string: title)
        w.write(key: "url", first: false)
        if let url { w.write(string: url) } else { w.append("null") }
        w.append(byte: UInt8(ascii: "}"))
        return w.string
    }

    /// Reads an event back from ``jsonLine()`` text (the stored form): required fields,
    /// known event type and severity, a valid timestamp.
    public static func decode(jsonLine: String) throws -> Event {
        guard case .object(let o) = try JSONParser.parse(jsonLine) else { throw JSONParseError(message: "event: not a JSON object") }
        func string(_ k: CodingKeys, required: Bool = true) throws -> String? {
            switch o[k.stringValue] {
            case .string(let s): return s
            case nil, .null?: if required { throw JSONParseError(message: "event: missing '\(k.stringValue)'") } else { return nil }
            default: throw JSONParseError(message: "event: '\(k.stringValue)' is not a string")
            }
        }
        guard let type = EventType(rawValue: try string(.event)!) else { throw JSONParseError(message: "event: unknown 'event' type") }
        let severity = try string(.severity, required: false).map { s in
            guard let v = Severity(rawValue: s) else { throw JSONParseError(message: "event: unknown severity '\(s)'") }
            return v
        } ?? .info
        let stamp = try string(.observedAt)!
        guard let observedAt = Timestamp.parse(stamp) else { throw JSONParseError(message: "event: bad timestamp \(stamp)") }
        let data: JSONValue
        switch o["data"] {
        case nil, .null?: data = .object([:])
        case let v?: data = v
        }
        return Event(
            id: try string(.id)!, source: try string(.source)!, provider: try string(.provider)!, kind: try string(.kind)!,
            event: type, key: try string(.key)!, title: try string(.title)!, body: try string(.body, required: false) ?? "",
            url: try string(.url, required: false), severity: severity, observedAt: observedAt, data: data)
    }
}
