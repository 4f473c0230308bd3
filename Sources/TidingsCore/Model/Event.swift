import Foundation

/// The one event shape used everywhere: stdout `--json`, webhook bodies, the exec sink's stdin.
///
/// Field names are the external contract (DESIGN §4).
public struct Event: Sendable, Equatable, Codable {
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

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        source = try c.decode(String.self, forKey: .source)
        provider = try c.decode(String.self, forKey: .provider)
        kind = try c.decode(String.self, forKey: .kind)
        event = try c.decode(EventType.self, forKey: .event)
        key = try c.decode(String.self, forKey: .key)
        title = try c.decode(String.self, forKey: .title)
        body = try c.decodeIfPresent(String.self, forKey: .body) ?? ""
        url = try c.decodeIfPresent(String.self, forKey: .url)
        severity = try c.decodeIfPresent(Severity.self, forKey: .severity) ?? .info
        let stamp = try c.decode(String.self, forKey: .observedAt)
        guard let date = Timestamp.parse(stamp) else {
            throw DecodingError.dataCorruptedError(forKey: .observedAt, in: c, debugDescription: "bad timestamp \(stamp)")
        }
        observedAt = date
        data = try c.decodeIfPresent(JSONValue.self, forKey: .data) ?? .object([:])
    }

    /// One line of compact JSON (no trailing newline), keys in contract order.
    public func jsonLine() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    public static func decode(jsonLine: String) throws -> Event {
        try JSONDecoder().decode(Event.self, from: Data(jsonLine.utf8))
    }
}
