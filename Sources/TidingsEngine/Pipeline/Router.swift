import FoundationEssentials
import TidingsPluginAPI

/// Chooses the sinks for an event: ordered rules, first match wins unless `continue`.
/// With no rules, every event goes to every sink.
package struct Router: Sendable {
    package var routes: [Route]
    package var allSinks: [String]

    package init(routes: [Route], allSinks: [String]) {
        self.routes = routes
        self.allSinks = allSinks
    }

    package func sinks(for event: Event) -> [String] {
        decisions(for: event, at: nil).map(\.sink)
    }

    /// Where the event goes and, per sink, whether it waits (DESIGN §10): held for the quiet
    /// hours of the route that sent it there, or collected for its `group_wait`. A sink reached
    /// through several routes (`continue = true`) takes the first route's timing. `now` nil:
    /// routing only, no timing (nothing is held). `through`, when given, keeps only those of the
    /// matching routes (by ``Route/identity``): a reminder goes through the routes whose
    /// `repeat_interval` passed.
    package func decisions(for event: Event, at now: Date?, through: Set<String>? = nil) -> [RouteDecision] {
        guard !routes.isEmpty else { return allSinks.map { RouteDecision(sink: $0, hold: nil) } }
        var out: [RouteDecision] = []
        for index in matching(event) where through?.contains(routes[index].identity) ?? true {
            let route = routes[index]
            let hold = now.flatMap { route.attention.hold(for: event, route: index, at: $0) }
            for s in route.sinks where !out.contains(where: { $0.sink == s }) {
                out.append(RouteDecision(sink: s, hold: hold))
            }
        }
        return out
    }

    /// The routes that match the event, in order: up to and including the first that matches
    /// without `continue`.
    package func routes(for event: Event) -> [Route] {
        matching(event).map { routes[$0] }
    }

    /// Their positions in ``routes``.
    private func matching(_ event: Event) -> [Int] {
        var out: [Int] = []
        for (index, route) in routes.enumerated() where route.matches(event) {
            out.append(index)
            if !route.continueMatching { break }
        }
        return out
    }
}

/// One sink an event goes to, and whether its delivery waits.
package struct RouteDecision: Sendable, Equatable {
    package var sink: String
    package var hold: Hold?
}

/// Why and until when a delivery waits in the outbox before it may be sent.
package enum Hold: Sendable, Equatable {
    /// Inside the route's quiet hours: until the window ends. Every delivery held to one sink
    /// by route `route` until that end goes out together, as one digest.
    case quietHours(until: Date, route: Int)
    /// The route's `group_wait`: joins the sink's open group of that route, or opens one that
    /// closes `wait` from now.
    case group(wait: TimeInterval, route: Int)

    /// The `delivery.hold` column.
    package var reason: Digest.Reason {
        switch self {
        case .quietHours: return .quietHours
        case .group: return .grouped
        }
    }
}

extension RouteAttention {
    /// How this route's timing applies to `event` at `now` (route number `route` in the config).
    /// Quiet hours come first (an event held for them also waits out any group); an event at or
    /// above `quiet_bypass` skips them but is still grouped.
    func hold(for event: Event, route: Int, at now: Date) -> Hold? {
        if let quietHours, let end = quietHours.end(ofWindowContaining: now), !(quietBypass.map { event.severity >= $0 } ?? false) {
            return .quietHours(until: end, route: route)
        }
        if let groupWait { return .group(wait: groupWait, route: route) }
        return nil
    }
}
