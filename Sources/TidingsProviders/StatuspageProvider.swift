import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// Broadcast notices from an Atlassian Statuspage v2 status page (`provider = "messagebox"`,
/// README.md, section "messagebox"): unresolved incidents and upcoming or in-progress scheduled
/// maintenances, from one `GET {base_url}/api/v2/summary.json`.
///
/// Kind `notice`, key = the incident's or maintenance's `id`. A new incident update or a status
/// change is a `changed` event whose body is the latest update. Severity from `impact`
/// (critical/major → critical, minor → warning, none/maintenance → info). A maintenance's
/// notice expires at `scheduled_until`; an incident's when it is resolved (it leaves the list).
package struct StatuspageProvider: Provider, EventDescriber, Sendable {
    /// `provider = "messagebox"`.
    package static let factory = ProviderFactory(
        name: "messagebox", summary: "Statuspage v2 status page: incidents and scheduled maintenance as notices"
    ) { options, _, _ in
        StatuspageProvider(base: try ProviderSupport.baseURL(options))
    }

    let base: URL

    package var host: String? { base.host }

    package func poll(_ context: PollContext) async throws -> PollResult {
        var headers = [("Accept", "application/json")]
        headers += context.validators.requestHeaders
        // A public page: no credentials, so redirects may lead to another host (never https → http).
        let response = try await context.send("GET", ProviderSupport.join(base, "/api/v2/summary.json"), headers: headers, credentials: .notSent)
        if response.status == 304 { return .notModified }
        guard ProviderSupport.isSuccess(response) else {
            throw PollError.http(response, credentials: .notSent, detail: PollError.excerpt(response.body))
        }
        return .snapshot(try Self.decode(response.body, host: base.host), validators: Validators(from: response))
    }

    /// A `summary.json` body → items (pure: what `poll` does after the request; fuzzed by `make fuzz`).
    /// - Parameter host: names the page when the summary does not.
    package static func decode(_ body: Data, host: String?) throws -> [Item] {
        let json = try ProviderSupport.json(body, what: "status page summary")
        guard case .object = json, json["incidents"] != nil || json["scheduled_maintenances"] != nil else {
            throw PollError(.transient, "status page summary: no 'incidents' or 'scheduled_maintenances' (is base_url a Statuspage v2 page?)")
        }
        let page = json["page"]?["name"]?.stringValue ?? host ?? ""
        let incidents = (json["incidents"]?.arrayValue ?? []).compactMap { Self.item($0, maintenance: false, page: page) }
        let maintenances = (json["scheduled_maintenances"]?.arrayValue ?? []).compactMap { Self.item($0, maintenance: true, page: page) }
        return incidents + maintenances
    }

    /// Statuses after which an entry no longer needs telling (it leaves the snapshot: `removed`).
    static let finished: Set<String> = ["resolved", "postmortem", "completed"]

    static func item(_ j: JSONValue, maintenance: Bool, page: String) -> Item? {
        guard let id = j["id"]?.stringValue, !id.isEmpty else { return nil }
        let status = j["status"]?.stringValue?.lowercased() ?? ""
        if finished.contains(status) { return nil }
        let impact = j["impact"]?.stringValue?.lowercased() ?? (maintenance ? "maintenance" : "none")
        let severity: Severity = ["critical", "major"].contains(impact) ? .critical : impact == "minor" ? .warning : .info
        let updates = (j["incident_updates"]?.arrayValue ?? []).sorted {
            ($0["created_at"]?.stringValue ?? "") > ($1["created_at"]?.stringValue ?? "")
        }
        let latest = updates.first
        let name = j["name"]?.stringValue ?? id
        let until = j["scheduled_until"]?.stringValue
        var data: [String: JSONValue] = [
            "type": .string(maintenance ? "maintenance" : "incident"), "status": .string(status), "impact": .string(impact),
            "page": .string(page), "update_id": latest?["id"] ?? .null, "updates": .number(Double(updates.count)),
        ]
        if maintenance {
            data["scheduled_for"] = j["scheduled_for"] ?? .null
            data["scheduled_until"] = j["scheduled_until"] ?? .null
        }
        let statusWord = status.replacingScalars("_", with: " ")
        return Item(
            key: id, kind: "notice", title: "\(page.isEmpty ? "" : "\(page): ")\(name)\(statusWord.isEmpty ? "" : " (\(statusWord))")",
            body: latest?["body"]?.stringValue ?? "", url: j["shortlink"]?.stringValue, severity: severity,
            data: .object(data), expiresAt: maintenance ? until.flatMap(Timestamp.parse) : nil)
    }

    package func describe(_ event: inout Event, change: ItemChange, firstSeen: Date) {
        guard change.type == .removed else { return }
        let maintenance = change.item.data["type"]?.stringValue == "maintenance"
        event.body = maintenance ? "Maintenance finished or cancelled." : "Incident resolved."
        event.severity = .info
    }
}
