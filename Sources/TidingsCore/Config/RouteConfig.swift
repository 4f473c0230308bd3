/// One `[[routes]]` rule: which events go to which sinks.
public struct Route: Sendable, Equatable {
    /// Each field: nil = any; else the event's value must be one of the list.
    public var source: [String]?
    public var provider: [String]?
    public var kind: [String]?
    public var severity: [String]?
    public var event: [String]?
    public var sinks: [String]
    /// Keep evaluating later rules after this one matched.
    public var continueMatching: Bool

    public init(
        source: [String]? = nil, provider: [String]? = nil, kind: [String]? = nil, severity: [String]? = nil,
        event: [String]? = nil, sinks: [String], continueMatching: Bool = false
    ) {
        self.source = source
        self.provider = provider
        self.kind = kind
        self.severity = severity
        self.event = event
        self.sinks = sinks
        self.continueMatching = continueMatching
    }

    public func matches(_ e: Event) -> Bool {
        func ok(_ list: [String]?, _ value: String) -> Bool { list.map { $0.contains(value) } ?? true }
        return ok(source, e.source) && ok(provider, e.provider) && ok(kind, e.kind)
            && ok(severity, e.severity.rawValue) && ok(event, e.event.rawValue)
    }
}

/// A configured sink instance.
public struct SinkConfig: Sendable {
    public var name: String
    public var type: String
    public var instance: any Sink
    public var file: String
    public var line: Int?
}
