/// Where the daemon stands, as `/-/ready` reports it (and sd_notify tells systemd).
package enum Readiness: Sendable, Equatable {
    /// Configuration loaded; the state is not open yet (e.g. waiting for `tidings check`).
    case starting
    /// Configuration and state loaded: polling.
    case ready
    /// SIGHUP: a new configuration is being loaded and the generation swapped.
    case reloading
    /// SIGTERM/SIGINT: finishing in-flight work.
    case stopping

    var reason: String {
        switch self {
        case .starting: return "starting: the state is not open yet"
        case .ready: return "ready"
        case .reloading: return "reloading the configuration"
        case .stopping: return "stopping"
        }
    }
}

/// One answer of the monitoring endpoint.
package struct MonitoringResponse: Sendable, Equatable {
    package var status: Int
    package var contentType: String
    package var body: [UInt8]
    /// The `Allow` header of a 405.
    package var allow: String?
    /// Further headers (the status page's security headers, `Location`, `WWW-Authenticate`).
    package var headers: [String: String] = [:]

    static func text(_ status: Int, _ text: String, allow: String? = nil) -> MonitoringResponse {
        MonitoringResponse(status: status, contentType: "text/plain; charset=utf-8", body: Array((text + "\n").utf8), allow: allow)
    }
}

/// The routes of `[http]` (DESIGN §8), without any socket: `GET /metrics`, `GET` or `HEAD`
/// `/-/healthy` and `/-/ready` (a `HEAD`: the same status, no body); another method on them
/// 405; any other path 404; a request with a body 413.
package struct MonitoringRoutes: Sendable {
    package var readiness: @Sendable () -> Readiness
    package var metrics: @Sendable () -> [UInt8]
    /// Why the daemon is not healthy (its scheduler loop stalled: ``DaemonPulse/stall(now:)``),
    /// or nil: `/-/healthy` answers 503 with it.
    package var unhealthy: @Sendable () -> String?

    package init(
        readiness: @escaping @Sendable () -> Readiness, metrics: @escaping @Sendable () -> [UInt8] = PrometheusExporter.exposition,
        unhealthy: @escaping @Sendable () -> String? = { nil }
    ) {
        self.readiness = readiness
        self.metrics = metrics
        self.unhealthy = unhealthy
    }

    package static let paths: Set<String> = ["/metrics", "/-/healthy", "/-/ready"]
    /// The probes: no credentials, any `Host`.
    package static let probes: Set<String> = ["/-/healthy", "/-/ready"]

    package func respond(method: String, path: String, hasBody: Bool) -> MonitoringResponse {
        guard Self.paths.contains(path) else { return .text(404, "not found: try /metrics, /-/healthy or /-/ready") }
        let probe = Self.probes.contains(path)
        guard method == "GET" || (probe && method == "HEAD") else {
            return probe ? .text(405, "method not allowed: use GET or HEAD", allow: "GET, HEAD") : .text(405, "method not allowed: use GET", allow: "GET")
        }
        guard !hasBody else { return .text(413, "a \(method) has no body") }
        if method == "HEAD" {
            var r = respond(method: "GET", path: path, hasBody: false)
            r.body = []
            return r
        }
        switch path {
        case "/metrics":
            return MonitoringResponse(status: 200, contentType: PrometheusExporter.contentType, body: metrics())
        case "/-/healthy":
            return unhealthy().map { .text(503, $0) } ?? .text(200, "healthy")
        default:
            let now = readiness()
            return .text(now == .ready ? 200 : 503, now.reason)
        }
    }
}
