import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// Prometheus Alertmanager API v2 (README.md, section "alertmanager"): the currently firing alerts.
///
/// Kind `alert`, key = Alertmanager's `fingerprint`. An alert that leaves the list (or whose
/// `endsAt` has passed) is resolved: a `removed` event "resolved after 12m". An alert that
/// resolves and fires again within `flap_window` (default 5m) is one `changed` event.
package struct AlertmanagerProvider: Provider, EventDescriber, Sendable {
    /// `provider = "alertmanager"`.
    package static let factory = ProviderFactory(
        name: "alertmanager", summary: "Prometheus Alertmanager: firing alerts, resolved alerts", defaultFlapWindow: 300
    ) { options, _, _ in
        let base = try ProviderSupport.baseURL(options)
        let filters = try options.stringList("filter") ?? []
        for f in filters where f.trimmed(newlines: false).isEmpty {
            throw options.error("filter", "\(options.what): empty matcher in 'filter'")
        }
        return AlertmanagerProvider(
            base: base, filters: filters, silenced: try options.bool("silenced") ?? false,
            inhibited: try options.bool("inhibited") ?? false, bearer: try options.secret("bearer_token", required: false))
    }

    let base: URL
    let filters: [String]
    let silenced: Bool
    let inhibited: Bool
    let bearer: Secret?

    package var host: String? { base.host }

    /// `GET /api/v2/alerts?active=true&silenced=…&inhibited=…&filter=…`
    var alertsURL: URL {
        var q = [
            URLQueryItem(name: "active", value: "true"), URLQueryItem(name: "silenced", value: String(silenced)),
            URLQueryItem(name: "inhibited", value: String(inhibited)),
        ]
        q += filters.map { URLQueryItem(name: "filter", value: $0) }
        return ProviderSupport.join(base, "/api/v2/alerts", query: q)
    }

    /// With a `bearer_token` (or user info in `base_url`) requests carry credentials.
    var credentials: Credentials { bearer != nil || base.user != nil ? .sent : .notSent }

    package func poll(_ context: PollContext) async throws -> PollResult {
        var headers = [("Accept", "application/json")]
        if let bearer { headers.append(("Authorization", "Bearer \(bearer.value)")) }
        let response = try await context.send("GET", alertsURL, headers: headers, credentials: credentials)
        guard ProviderSupport.isSuccess(response) else {
            throw PollError.http(response, credentials: credentials, detail: PollError.excerpt(response.body))
        }
        return .snapshot(try Self.decode(response.body, now: context.now))
    }

    /// A successful response body → items (pure: what `poll` does after the request; fuzzed by `make fuzz`).
    package static func decode(_ body: Data, now: Date) throws -> [Item] {
        let json = try ProviderSupport.json(body, what: "Alertmanager alerts")
        guard let list = json.arrayValue else {
            throw PollError(.transient, "Alertmanager alerts: expected a JSON array (body: \(PollError.excerpt(body)))")
        }
        return items(list, now: now)
    }

    /// Alerts → items, dropping those whose `endsAt` has passed.
    static func items(_ alerts: [JSONValue], now: Date) -> [Item] {
        alerts.compactMap { a in
            guard let fp = a["fingerprint"]?.stringValue, !fp.isEmpty else { return nil }
            if let ends = a["endsAt"]?.stringValue.flatMap(Timestamp.parse), ends <= now { return nil }
            let labels = a["labels"]?.objectValue ?? [:]
            let annotations = a["annotations"]?.objectValue ?? [:]
            let name = labels["alertname"]?.stringValue ?? "alert"
            let summary = annotations["summary"]?.stringValue ?? ""
            let title: String
            if !summary.isEmpty {
                title = summary
            } else if let instance = labels["instance"]?.stringValue, !instance.isEmpty {
                title = "\(name) on \(instance)"
            } else {
                title = name
            }
            let severity: Severity
            switch labels["severity"]?.stringValue?.lowercased() {
            case "critical": severity = .critical
            case "warning": severity = .warning
            default: severity = .info
            }
            let url = a["generatorURL"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            let body = annotations["description"]?.stringValue ?? ""
            // Only stable fields: endsAt / updatedAt move on every re-send and are not a change.
            let data: JSONValue = [
                "labels": .object(labels), "annotations": .object(annotations),
                "startsAt": a["startsAt"] ?? .null, "state": a["status"]?["state"] ?? .null,
            ]
            return Item(key: fp, kind: "alert", title: title, body: body, url: url, severity: severity, data: data)
        }
    }

    package func describe(_ event: inout Event, change: ItemChange, firstSeen: Date) {
        switch change.type {
        case .removed:
            let started = change.item.data["startsAt"]?.stringValue.flatMap(Timestamp.parse) ?? firstSeen
            let lasted = Self.format(event.observedAt.timeIntervalSince(min(started, firstSeen)))
            event.title = "Resolved: \(change.item.title)"
            event.body = "resolved after \(lasted)" + (change.item.body.isEmpty ? "" : "\n\(change.item.body)")
            if case .object(var o) = event.data {
                o["resolved"] = true
                event.data = .object(o)
            }
        case .changed where change.flapped:
            event.title = "Firing again: \(change.item.title)"
        default:
            break
        }
    }

    /// 754 s → "12m", 3 h 5 m → "3h5m".
    static func format(_ seconds: TimeInterval) -> String {
        let s = max(0, Int(seconds.rounded()))
        if s < 60 { return "\(s)s" }
        let d = s / 86_400
        let h = (s % 86_400) / 3600
        let m = (s % 3600) / 60
        return [d > 0 ? "\(d)d" : "", h > 0 ? "\(h)h" : "", m > 0 ? "\(m)m" : ""].joined()
    }
}
