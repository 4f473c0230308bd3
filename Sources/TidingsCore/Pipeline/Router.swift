/// Chooses the sinks for an event: ordered rules, first match wins unless `continue`.
/// With no rules, every event goes to every sink.
public struct Router: Sendable {
    public var routes: [Route]
    public var allSinks: [String]

    public init(routes: [Route], allSinks: [String]) {
        self.routes = routes
        self.allSinks = allSinks
    }

    /// The sinks of the routes the event takes. `through`, when given, keeps only those routes
    /// (by ``Route/identity``): a reminder goes through the routes whose `repeat_interval` passed.
    public func sinks(for event: Event, through: Set<String>? = nil) -> [String] {
        guard !routes.isEmpty else { return allSinks }
        var out: [String] = []
        for route in routes(for: event) where through?.contains(route.identity) ?? true {
            for s in route.sinks where !out.contains(s) { out.append(s) }
        }
        return out
    }

    /// The routes that match the event, in order: up to and including the first that matches
    /// without `continue`.
    public func routes(for event: Event) -> [Route] {
        var out: [Route] = []
        for route in routes where route.matches(event) {
            out.append(route)
            if !route.continueMatching { break }
        }
        return out
    }
}
