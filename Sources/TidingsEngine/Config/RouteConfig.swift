import FoundationEssentials
import TidingsPluginAPI

/// One `[[routes]]` rule: which events go to which sinks.
package struct Route: Sendable, Equatable {
    /// Each field: nil = any; else the event's value must be one of the list.
    package var source: [String]?
    package var provider: [String]?
    package var kind: [String]?
    package var severity: [String]?
    package var event: [String]?
    package var sinks: [String]
    /// Keep evaluating later rules after this one matched.
    package var continueMatching: Bool
    /// When and how this route's deliveries are held or grouped (DESIGN §10).
    package var attention = RouteAttention()

    package init(
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

    package func matches(_ e: Event) -> Bool {
        func ok(_ list: [String]?, _ value: String) -> Bool { list.map { $0.contains(value) } ?? true }
        return ok(source, e.source) && ok(provider, e.provider) && ok(kind, e.kind)
            && ok(severity, e.severity.rawValue) && matchesEvent(e.event)
    }

    /// A `reminder` is about an item still present: a route whose `event` list names `new` or
    /// `changed` (the events that announce a present item) takes it too, as does one naming
    /// `reminder`.
    func matchesEvent(_ type: EventType) -> Bool {
        guard let event else { return true }
        if event.contains(type.rawValue) { return true }
        return type == .reminder && (event.contains(EventType.new.rawValue) || event.contains(EventType.changed.rawValue))
    }
}

/// A route's timing options (DESIGN §10): when its deliveries are held, grouped, repeated.
package struct RouteAttention: Sendable, Equatable {
    /// `quiet_hours`: deliveries routed inside the window wait in the outbox until it ends.
    package var quietHours: QuietHours?
    /// `quiet_bypass`: events at or above this severity go at once, even in quiet hours.
    /// Nil: none bypass.
    package var quietBypass: Severity?
    /// `group_wait`: a sink's deliveries from this route are collected this long after the
    /// first, then sent as one digest.
    package var groupWait: TimeInterval?
    /// `repeat_interval`: reminders for items still present with severity warning or critical.
    package var repeatInterval: TimeInterval?
    package init(quietHours: QuietHours? = nil, quietBypass: Severity? = nil, groupWait: TimeInterval? = nil, repeatInterval: TimeInterval? = nil) {
        self.quietHours = quietHours
        self.quietBypass = quietBypass
        self.groupWait = groupWait
        self.repeatInterval = repeatInterval
    }
}

/// A configured sink instance.
package struct SinkConfig: Sendable {
    package var name: String
    package var type: String
    package var instance: any Sink
    package var file: String
    package var line: Int?

    package init(name: String, type: String, instance: any Sink, file: String, line: Int? = nil) {
        self.name = name
        self.type = type
        self.instance = instance
        self.file = file
        self.line = line
    }
}
