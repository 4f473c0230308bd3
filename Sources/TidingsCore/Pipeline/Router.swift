/// Chooses the sinks for an event: ordered rules, first match wins unless `continue`.
/// With no rules, every event goes to every sink.
public struct Router: Sendable {
    public var routes: [Route]
    public var allSinks: [String]

    public init(routes: [Route], allSinks: [String]) {
        self.routes = routes
        self.allSinks = allSinks
    }

    public func sinks(for event: Event) -> [String] {
        guard !routes.isEmpty else { return allSinks }
        var out: [String] = []
        for route in routes where route.matches(event) {
            for s in route.sinks where !out.contains(s) { out.append(s) }
            if !route.continueMatching { break }
        }
        return out
    }
}
