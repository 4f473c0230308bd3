import Dispatch
import FoundationEssentials
import TidingsTemplates
import Synchronization
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI

/// One request to the status page, without a socket.
package struct WebRequest: Sendable {
    package var method: String
    package var path: String
    package var query: String
    /// Header names in lower case.
    package var headers: [String: String]
    package var body: [UInt8]

    package init(method: String, path: String, query: String = "", headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// The status page (DESIGN §13, docs/status-page.md): server-rendered HTML over the daemon's
/// state, with the same ``StatusReport`` as `tidings status`. Reads go to the state; changes
/// (retry or drop a dead letter, add or expire a silence, dismiss a notice, poll now) are
/// POSTs checked for a CSRF token and a same-origin `Origin`/`Referer`.
package final class StatusPages: Sendable {
    /// What the pages read and act on; set once the daemon owns the state.
    package struct Backend: Sendable {
        package var config: @Sendable () -> TidingsConfig
        package var store: StateStore
        package var pid: Int32
        package var startedAt: Date
        /// Polls now through the daemon, as `tidings check` asks it to.
        package var pollNow: @Sendable ([String]) async -> [ControlReply]
        /// Wakes the outbox: a requeued dead letter goes out now, not at the worker's next look.
        package var outboxChanged: @Sendable () -> Void
        /// The daemon's pulse now (overrunning polls, a stalled scheduler) for the summary.
        package var pulse: @Sendable () -> DaemonPulse?

        package init(
            config: @escaping @Sendable () -> TidingsConfig, store: StateStore, pid: Int32, startedAt: Date,
            pollNow: @escaping @Sendable ([String]) async -> [ControlReply], outboxChanged: @escaping @Sendable () -> Void,
            pulse: @escaping @Sendable () -> DaemonPulse? = { nil }
        ) {
            self.pulse = pulse
            self.config = config
            self.store = store
            self.pid = pid
            self.startedAt = startedAt
            self.pollNow = pollNow
            self.outboxChanged = outboxChanged
        }
    }

    /// The most a POST body may hold.
    package static let maxBody = 16 * 1024
    /// Rows a list shows at most.
    package static let maxRows = 500

    private let backend = Mutex<Backend?>(nil)
    private let settings = Mutex<HTTPSettings?>(nil)
    package let security: WebSecurity
    private let clock: @Sendable () -> Date

    package init(security: WebSecurity = WebSecurity(), clock: @escaping @Sendable () -> Date = { Date() }) {
        self.security = security
        self.clock = clock
    }

    package func attach(_ b: Backend) { backend.withLock { $0 = b } }
    package func configure(_ s: HTTPSettings?) { settings.withLock { $0 = s } }
    package var current: HTTPSettings? { settings.withLock { $0 } }

    // MARK: - Dispatch

    /// The answer to `request`, or nil when the status page is off (the monitoring routes answer).
    package func respond(_ request: WebRequest) async -> MonitoringResponse? {
        guard let s = current, s.statusPage else { return nil }
        if !WebSecurity.authorized(request.headers["authorization"], s.auth) {
            var r = page(401, "Authentication required", "This status page needs credentials.")
            if let auth = s.auth { r.headers["WWW-Authenticate"] = WebSecurity.challenge(auth) }
            return r
        }
        if request.path == "/static/style.css" || request.path == "/static/app.js" {
            guard request.method == "GET" else { return secured(.text(405, "method not allowed: use GET", allow: "GET")) }
            let css = request.path.hasSuffix(".css")
            return secured(
                MonitoringResponse(
                    status: 200, contentType: css ? "text/css; charset=utf-8" : "text/javascript; charset=utf-8",
                    body: Array((css ? StatusPageAssets.css : StatusPageAssets.js).utf8)))
        }
        guard let b = backend.withLock({ $0 }) else {
            return page(503, "Starting", "The daemon does not own the state yet. Reload in a moment.")
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { $0.percentDecoded ?? String($0) }
        do {
            switch request.method {
            case "GET":
                let query = request.query
                return try await offPool { [self] in
                    if parts == [""] { return try overview(b) }
                    if parts.count == 2 && parts[0] == "sources" { return try source(b, parts[1]) }
                    if parts == ["history"] { return try history(b, FormDecoding.fields(Substring(query))) }
                    if parts == ["outbox"] { return try outbox(b) }
                    if parts == ["silences"] { return try silences(b, error: nil) }
                    if parts == ["notices"] { return try notices(b) }
                    return notFound()
                }
            case "POST":
                if let refused = refusal(request, hosts: HostPolicy(listen: s.listen, allowed: s.allowedHosts)) { return refused }
                if parts.count == 3 && parts[0] == "sources" && parts[2] == "poll" {
                    guard b.config().source(named: parts[1]) != nil else { return notFound() }
                    // Through the daemon, as `tidings check` asks it; awaited, not blocking.
                    return pollResult(b, parts[1], await b.pollNow([parts[1]]))
                }
                let form = FormDecoding.fields(Substring(decoding: request.body, as: UTF8.self))
                return try await offPool { [self] in try change(b, parts, form) }
            default:
                return secured(.text(405, "method not allowed: use GET, or POST for a change", allow: "GET, POST"))
            }
        } catch {
            return page(500, "Cannot read the state", Redactor.shared.scrub("\(error)"))
        }
    }

    /// The pages read and write the state synchronously (a write can wait for the lock, a
    /// PostgreSQL state for the network): on threads of their own, never the cooperative pool.
    private static let queue = DispatchQueue(label: "tidings.status-page", attributes: .concurrent)

    private func offPool(_ body: @escaping @Sendable () throws -> MonitoringResponse) async throws -> MonitoringResponse {
        try await withCheckedThrowingContinuation { c in
            Self.queue.async { c.resume(with: Result { try body() }) }
        }
    }

    /// Why a POST is refused: another origin, or no valid CSRF token.
    private func refusal(_ request: WebRequest, hosts: HostPolicy) -> MonitoringResponse? {
        guard WebSecurity.sameOrigin(origin: request.headers["origin"], referer: request.headers["referer"], hosts: hosts) else {
            return page(403, "Refused", "This change did not come from a page of this server (Origin or Referer).")
        }
        let type = request.headers["content-type"]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else {
            return page(415, "Refused", "A change is sent as a form (application/x-www-form-urlencoded).")
        }
        let form = FormDecoding.fields(Substring(decoding: request.body, as: UTF8.self))
        guard security.validCSRF(form["csrf"], now: clock()) else {
            return page(403, "Refused", "The form's token is missing or stale: reload the page and try again.")
        }
        return nil
    }

    private func change(_ b: Backend, _ parts: [String], _ form: [String: String]) throws -> MonitoringResponse {
        let now = clock()
        // [collection, id, action] or [collection].
        let (what, id, action) = (parts.first ?? "", parts.count == 3 ? parts[1] : "", parts.count == 3 ? parts[2] : "")
        switch (what, action) {
        case ("outbox", "retry") where Int64(id) != nil:
            let done = try OutboxStore(store: b.store).requeueDead("#\(id)", now: now)
            if done > 0 { b.outboxChanged() }
            return see("/outbox?done=" + (done > 0 ? "retried" : "none"))
        case ("outbox", "drop") where Int64(id) != nil:
            let done = try OutboxStore(store: b.store).dropDead(id: Int64(id)!)
            return see("/outbox?done=" + (done ? "dropped" : "none"))
        case ("silences", "") where parts.count == 1:
            return try addSilence(b, form, now: now)
        case ("silences", "expire"):
            do { _ = try SilenceStore.expire(b.store, id: id, now: now) } catch let e as SilenceStore.ExpireError {
                return try silences(b, error: "\(e)", status: 404)
            }
            return see("/silences?done=expired")
        case ("notices", "dismiss"):
            do { _ = try NoticeBook.dismiss(b.store, id: id, now: now) } catch {
                return page(404, "No such notice", "\(error)")
            }
            return see("/notices?done=dismissed")
        default:
            return notFound()
        }
    }

    // MARK: - Pages

    private func overview(_ b: Backend) throws -> MonitoringResponse {
        let config = b.config()
        let now = clock()
        let report = try StatusReport.read(
            config: config, store: b.store, lock: .heldByDaemon(pid: b.pid, since: b.startedAt), pulse: b.pulse(), now: now)
        let statuses = try b.store.statuses()
        let day = try b.store.history(source: nil, limit: 5000)
        let sources: [[String: Any]] = config.sources.map { s in
            let st = statuses[s.name]
            var row = sourceRow(s, st, now: now)
            row["chart"] = StatusChart.hours(events: events(day).filter { $0.source == s.name }, polls: RecentPolls.shared.hours(s.name), now: now)
            return row
        }
        let reasons = report.reasons
        let ctx: [String: Any] = [
            "healthy": reasons.isEmpty, "reasons": reasons,
            "pid": "\(b.pid)", "since": Self.time(b.startedAt, now), "version": TidingsVersion.string,
            "backend": report.backend, "location": report.location,
            "instances": report.daemon.instances.map { ["label": $0.label, "sources": $0.sources, "seen": Self.time($0.seenAt, now)] as [String: Any] },
            "counts": SourceHealth.allCases.map { ["health": $0.rawValue, "n": report.counts[$0] ?? 0] as [String: Any] },
            "sources": sources,
            "sinks": report.sinks.map { s -> [String: Any] in
                [
                    "name": s.name, "type": s.type ?? "not configured", "pending": s.pending, "held": s.held, "dead": s.dead,
                    "lastDeadError": Self.some(s.lastDeadError), "holds": s.holds.map { "\($0.count) \($0.hold.description(now: now))" },
                ]
            },
            "silences": report.silences.map { silenceRow($0, now: now) },
            "notices": report.notices.map { noticeRow($0, now: now) },
            "events": report.events.reversed().map { entryRow($0, now: now) },
            "http": httpRows(),
        ]
        return render("overview", "Overview", ctx)
    }

    private func source(_ b: Backend, _ name: String) throws -> MonitoringResponse {
        let config = b.config()
        let now = clock()
        guard let s = config.source(named: name) else { return notFound() }
        let st = try b.store.statuses()[name]
        let items = try b.store.currentItems(source: name)
        let recent = try b.store.history(source: name, limit: 1000)
        var ctx = sourceRow(s, st, now: now)
        let polls = RecentPolls.shared.of(name)
        ctx["chart"] = StatusChart.hours(events: events(recent), polls: RecentPolls.shared.hours(name), now: now)
        ctx["hasPolls"] = !polls.isEmpty
        ctx["polls"] = polls.suffix(20).reversed().map { p -> [String: Any] in
            [
                "at": Self.time(p.at, now), "duration": decimalText(p.seconds, digits: 3) + " s", "failed": p.error != nil,
                "outcome": p.error ?? "ok", "events": p.events,
            ]
        }
        ctx["items"] = items.prefix(Self.maxRows).map { c -> [String: Any] in
            var row = itemRow(title: c.item.title, body: c.item.body, url: c.item.url, severity: c.item.severity)
            row["kind"] = c.item.kind
            row["seen"] = Self.time(c.firstSeen, now)
            row["missing"] = c.missing
            return row
        }
        ctx["itemCount"] = items.count
        ctx["more"] = items.count > Self.maxRows
        ctx["events"] = recent.suffix(50).reversed().map { entryRow($0, now: now) }
        ctx["interval"] = DurationParser.format(s.settings.interval)
        ctx["file"] = s.file + (s.line.map { ":\($0)" } ?? "")
        return render("source", "Source " + name, ctx)
    }

    private func history(_ b: Backend, _ q: [String: String]) throws -> MonitoringResponse {
        let now = clock()
        let config = b.config()
        let source = q["source"].flatMap { $0.isEmpty ? nil : $0 }
        let kind = q["kind"].flatMap { $0.isEmpty ? nil : $0 }
        let severity = q["severity"].flatMap { $0.isEmpty ? nil : Severity(rawValue: $0) }
        let entries = try b.store.history(source: source, limit: 5000).filter { entry in
            guard case .event(let e, _) = entry else { return kind == nil && severity == nil }
            return (kind == nil || e.kind == kind || e.event.rawValue == kind) && (severity == nil || e.severity == severity)
        }
        let shown = entries.suffix(Self.maxRows).reversed()
        let ctx: [String: Any] = [
            "events": shown.map { entryRow($0, now: now) },
            "count": entries.count,
            "sourceOptions": ([""] + config.sources.map(\.name)).map {
                ["value": $0, "label": $0.isEmpty ? "any source" : $0, "selected": $0 == (source ?? "")] as [String: Any]
            },
            "kind": kind ?? "",
            "severityOptions": ([""] + Severity.allCases.map(\.rawValue)).map {
                ["value": $0, "label": $0.isEmpty ? "any severity" : $0, "selected": $0 == (severity?.rawValue ?? "")] as [String: Any]
            },
        ]
        return render("history", "History", ctx)
    }

    private func outbox(_ b: Backend) throws -> MonitoringResponse {
        let now = clock()
        let entries = try OutboxStore(store: b.store).entries(now: now)
        let rows = entries.prefix(Self.maxRows).map { e -> [String: Any] in
            [
                "id": "\(e.id)", "sink": e.sink, "status": e.status.rawValue, "dead": e.status == .dead, "attempts": e.attempts,
                "created": Self.time(e.createdAt, now), "next": Self.some(e.nextAttempt.map { Self.time($0, now) }),
                "error": Self.some(e.lastError), "title": e.event?.title ?? "(event \(e.eventID ?? "?") cannot be read)",
                "source": e.event?.source ?? "", "hold": Self.some(e.hold?.description(now: now)),
            ]
        }
        return render("outbox", "Outbox", ["entries": rows, "count": entries.count])
    }

    private func silences(_ b: Backend, error: String?, status: Int = 200, form: [String: String] = [:]) throws -> MonitoringResponse {
        let now = clock()
        let all = try SilenceStore.all(b.store)
        let ctx: [String: Any] = [
            "active": all.filter { $0.state(at: now) != .expired }.map { silenceRow($0, now: now) },
            "expired": all.filter { $0.state(at: now) == .expired }.suffix(50).reversed().map { silenceRow($0, now: now) },
            "error": Self.some(error),
            "matchers": form["matchers"] ?? "", "duration": form["duration"] ?? "2h", "comment": form["comment"] ?? "",
        ]
        var r = render("silences", "Silences", ctx)
        r.status = status
        return r
    }

    private func addSilence(_ b: Backend, _ form: [String: String], now: Date) throws -> MonitoringResponse {
        let lines = (form["matchers"] ?? "").split(whereSeparator: \.isNewline).map { $0.trimmed(newlines: false) }.filter { !$0.isEmpty }
        var problems: [String] = []
        var matchers: [SilenceMatcher] = []
        for line in lines.prefix(20) {
            do { matchers.append(try SilenceMatcher(parsing: line)) } catch { problems.append(error.description) }
        }
        if lines.isEmpty { problems.append("give at least one matcher, e.g. source=helpdesk") }
        if lines.count > 20 { problems.append("at most 20 matchers") }
        var seconds: TimeInterval = 0
        do { seconds = try DurationParser.seconds(form["duration"] ?? "") } catch { problems.append("duration: \(error)") }
        if seconds <= 0 && problems.isEmpty { problems.append("duration: give a positive duration, e.g. 2h") }
        let comment = String((form["comment"] ?? "").prefix(500))
        guard problems.isEmpty else { return try silences(b, error: problems.joined(separator: "; "), status: 400, form: form) }
        let user: String
        if case .basic(let name, _)? = current?.auth { user = name } else { user = "status page" }
        try SilenceStore.add(b.store, matchers: matchers, comment: comment, createdBy: user, now: now, until: now.addingTimeInterval(seconds))
        return see("/silences?done=added")
    }

    private func notices(_ b: Backend) throws -> MonitoringResponse {
        let now = clock()
        return render("notices", "Notices", ["notices": try NoticeBook.pending(b.store, now: now).map { noticeRow($0, now: now) }])
    }

    private func pollResult(_ b: Backend, _ name: String, _ replies: [ControlReply]) -> MonitoringResponse {
        let now = clock()
        var lines: [String] = []
        var events: [[String: Any]] = []
        var failed = false
        for r in replies {
            switch r {
            case .event(let e, let silence): events.append(eventRow(e, silencedBy: silence, now: now))
            case .result(_, .ok): lines.append("polled: ok")
            case .result(_, .failed(let m)):
                lines.append("poll failed: " + m)
                failed = true
            case .error(let m), .busy(let m):
                lines.append(m)
                failed = true
            case .waiting, .done: break
            }
        }
        var r = render("poll", "Poll " + name, ["name": name, "lines": lines, "events": events, "failed": failed])
        r.status = failed ? 502 : 200
        return r
    }

    // MARK: - Rows

    private func events(_ entries: [StateStore.HistoryEntry]) -> [Event] {
        entries.compactMap { if case .event(let e, _) = $0 { return e } else { return nil } }
    }

    private func sourceRow(_ s: SourceConfig, _ st: SourceStatus?, now: Date) -> [String: Any] {
        let health = SourceHealth(s, st)
        return [
            "name": s.name, "provider": s.provider, "health": health.rawValue, "bad": health.isFailing,
            "items": st?.items ?? 0, "failures": Self.some((st?.failures ?? 0) > 0 ? "\(st?.failures ?? 0)" : nil),
            "lastSuccess": st?.lastSuccess.map { Self.time($0, now) } ?? "never",
            "lastError": Self.some(st?.lastError), "lastErrorAt": st?.lastErrorAt.map { Self.time($0, now) } ?? "",
            "nextDue": health == .paused || health == .authFailed ? "" : (st?.nextDue.map { Self.time($0, now) } ?? "soon"),
            "link": "/sources/" + Self.pathComponent(s.name),
        ]
    }

    private func itemRow(title: String, body: String, url: String?, severity: Severity) -> [String: Any] {
        ["title": title, "body": Self.some(String(body.prefix(2000))), "url": Self.some(Self.safeURL(url)), "severity": severity.rawValue]
    }

    private func eventRow(_ e: Event, silencedBy: String?, now: Date) -> [String: Any] {
        var row = itemRow(title: e.title, body: e.body, url: e.url, severity: e.severity)
        row["source"] = e.source
        row["kind"] = e.kind
        row["event"] = e.event.rawValue
        row["at"] = Self.time(e.observedAt, now)
        row["silenced"] = Self.some(silencedBy)
        return row
    }

    private func entryRow(_ entry: StateStore.HistoryEntry, now: Date) -> [String: Any] {
        switch entry {
        case .event(let e, let silence): return eventRow(e, silencedBy: silence, now: now)
        case .unreadable(let id, let source, let reason):
            return ["source": source, "title": "event \(id) cannot be read (\(reason))", "severity": "info", "event": "?", "at": ""]
        }
    }

    private func silenceRow(_ s: Silence, now: Date) -> [String: Any] {
        [
            "id": s.id, "matchers": s.matchers.map(\.description).joined(separator: " "), "comment": Self.some(s.comment), "by": s.createdBy,
            "ends": Self.time(s.endsAt, now), "active": s.state(at: now) != .expired,
        ]
    }

    private func noticeRow(_ n: PendingNotice, now: Date) -> [String: Any] {
        var row = itemRow(title: n.title, body: n.body, url: n.url, severity: n.severity)
        row["id"] = n.id
        row["source"] = n.source
        row["at"] = Self.time(n.createdAt, now)
        return row
    }

    /// `[http]` as configured; a secret shows as set, never its value.
    private func httpRows() -> [[String: String]] {
        guard let s = current else { return [] }
        var rows = [["key": "listen", "value": s.listen.description], ["key": "status_page", "value": "true"]]
        if !s.allowedHosts.isEmpty { rows.append(["key": "allowed_hosts", "value": s.allowedHosts.map(\.description).joined(separator: ", ")]) }
        switch s.auth {
        case nil: rows.append(["key": "auth", "value": "none (loopback only)"])
        case .basic(let user, _)?: rows.append(["key": "auth", "value": "basic, user \(user), password set"])
        case .bearer?: rows.append(["key": "auth", "value": "bearer, token set"])
        }
        return rows
    }

    // MARK: - Rendering

    private func render(_ template: String, _ title: String, _ ctx: [String: Any]) -> MonitoringResponse {
        var ctx = ctx
        ctx["title"] = title
        ctx["csrf"] = security.csrfToken(now: clock())
        let html = StatusPageTemplates.library.render(templateValue(ctx), withTemplate: template) ?? "template \(template) is missing"
        return secured(MonitoringResponse(status: 200, contentType: "text/html; charset=utf-8", body: Array(html.utf8)))
    }

    /// A page that says one thing (`message` is text: the template escapes it).
    private func page(_ status: Int, _ title: String, _ message: String) -> MonitoringResponse {
        let html = StatusPageTemplates.library.render(templateValue(["title": title, "message": message]), withTemplate: "message") ?? title
        return secured(MonitoringResponse(status: status, contentType: "text/html; charset=utf-8", body: Array(html.utf8)))
    }

    private func notFound() -> MonitoringResponse { page(404, "Not found", "No such page.") }

    /// Post/Redirect/Get: 303 to a page of this server.
    private func see(_ location: String) -> MonitoringResponse {
        var r = secured(.text(303, "see " + location))
        r.headers["Location"] = location
        return r
    }

    private func secured(_ r: MonitoringResponse) -> MonitoringResponse {
        var r = r
        for (k, v) in WebSecurity.headers { r.headers[k] = v }
        return r
    }

    /// A value for `{{#x}}…{{/x}}`: the text, or `false` when there is none (Mustache renders a
    /// section for any string, even an empty one, and a missing key would be looked up in the
    /// enclosing context).
    static func some(_ s: String?) -> Any { s.flatMap { $0.isEmpty ? nil : $0 } ?? false }

    /// A link only to http(s): `javascript:` and the like from remote text are dropped.
    package static func safeURL(_ s: String?) -> String? {
        guard let s, s.utf8.count <= 4096, let u = URL(string: s), let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return nil
        }
        return s
    }

    static func pathComponent(_ s: String) -> String {
        s.percentEncoded(keeping: isUnreservedURLByte)
    }

    static func time(_ d: Date, _ now: Date) -> String {
        let delta = d.timeIntervalSince(now)
        let rel = DurationParser.format(abs(delta).rounded())
        return Timestamp.format(d) + (delta <= 0 ? " (\(rel) ago)" : " (in \(rel))")
    }
}

/// A small server-rendered SVG: polls (grey, failed ones red) and events (blue) per hour over
/// the last day, each on its own scale. Numbers only: nothing remote goes into it.
package enum StatusChart {
    /// `polls` are counted per clock hour (``RecentPolls/Hours``): each lands in the hour bar
    /// its clock hour's middle falls in.
    package static func hours(events: [Event], polls: RecentPolls.Hours, now: Date) -> String {
        func buckets(_ counts: [(at: Date, n: Int)]) -> [Int] {
            var out = [Int](repeating: 0, count: 24)
            for (d, n) in counts {
                let age = now.timeIntervalSince(d)
                if age >= 0 && age < 86_400 { out[23 - Int(age / 3600)] += n }
            }
            return out
        }
        let slots = polls.slots(now: now)
        let e = buckets(events.map { ($0.observedAt, 1) })
        let p = buckets(slots.map { ($0.at, $0.polls) })
        let f = buckets(slots.map { ($0.at, $0.failed) })
        let (eTotal, pTotal, fTotal) = (e.reduce(0, +), p.reduce(0, +), f.reduce(0, +))
        let label = "last 24 h: \(pTotal) polls (\(fTotal) failed), \(eTotal) events"
        var svg = "<svg class=\"chart\" viewBox=\"0 0 240 40\" width=\"240\" height=\"40\" role=\"img\" aria-label=\"\(label)\">"
        svg += "<title>\(label)</title><rect x=\"0\" y=\"39\" width=\"240\" height=\"1\" fill=\"#999\"/>"
        func bars(_ counts: [Int], x: Int, fill: String, top: Int) {
            for (i, n) in counts.enumerated() where n > 0 {
                let h = max(2, Int((Double(n) / Double(max(1, top)) * 38).rounded()))
                svg += "<rect x=\"\(i * 10 + x)\" y=\"\(39 - h)\" width=\"4\" height=\"\(h)\" fill=\"\(fill)\"/>"
            }
        }
        let pollTop = p.max() ?? 0
        bars(p, x: 1, fill: "#9aa", top: pollTop)
        bars(f, x: 1, fill: "#c0392b", top: pollTop)
        bars(e, x: 5, fill: "#3a7bd5", top: e.max() ?? 0)
        return svg + "</svg>"
    }
}

/// A page's context (dictionaries, arrays, strings, numbers, booleans, optionals) as a template
/// reads it. A string is true in a section even when empty, as for swift-mustache's plain strings.
package func templateValue(_ v: Any) -> TemplateValue {
    switch v {
    case let o as OptionalValue: return o.wrapped.map(templateValue) ?? .null
    case let s as String: return .text(s)
    case let s as Substring: return .text(String(s))
    case let b as Bool: return .bool(b)
    case let n as Int: return .int(n)
    case let n as Int64: return .int(Int(n))
    case let d as Double: return .double(d)
    case let a as [Any]:
        return .list(TemplateList(count: a.count, element: { templateValue(a[$0]) }, text: { "\(a)" }))
    case let d as [String: Any]:
        return .object(TemplateObject(child: { d[$0].map(templateValue) }, keys: { Array(d.keys) }, text: { "\(d)" }))
    default: return .text("\(v)")
    }
}

private protocol OptionalValue { var wrapped: Any? { get } }
extension Optional: OptionalValue {
    var wrapped: Any? { self.map { $0 as Any } }
}
