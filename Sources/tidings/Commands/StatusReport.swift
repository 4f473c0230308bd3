import Foundation
import TidingsCore

/// What `tidings status` shows (DESIGN §13), read from the state with one query per section,
/// whatever the number of sources.
struct StatusReport {
    /// Who owns the state.
    struct Daemon {
        /// The daemon on this machine that holds the state lock (tidings.lock), if any.
        var pid: Int32?
        /// When it took the lock: the lock file's modification time (it writes its PID then).
        var since: Date?
        /// Its version, when it is known. The control protocol has no cheap request for it (its
        /// only op is `poll`), so this is the version of the binary running `tidings status`,
        /// given only when the daemon runs that same executable (/proc/PID/exe is the same file);
        /// nil when it runs another one (an upgrade replaced the file) or /proc does not say.
        var version: String?
        /// Whether the lock is held (also when the PID is not written yet).
        var holdsLock: Bool
        /// PostgreSQL (DESIGN §11): every instance that renewed its leases in the last 30 s,
        /// on any machine, with the leases it holds. Empty for a SQLite state.
        var instances: [LeaseBook.LiveInstance]

        var running: Bool { holdsLock || !instances.isEmpty }
    }

    /// A source's health, as `tidings sources` names it (`paused` there is `disabled`).
    enum Health: String, CaseIterable {
        case ok, new, failing
        case authFailed = "auth-failed"
        case paused

        /// Of `source`, as stored (`status`: nil before its first poll).
        init(_ source: SourceConfig, _ status: SourceStatus?) {
            if !source.settings.enabled { self = .paused }
            else if status?.authFailedHash == source.configHash { self = .authFailed }
            else if (status?.failures ?? 0) > 0 { self = .failing }
            else if status?.lastSuccess == nil { self = .new }
            else { self = .ok }
        }
    }

    /// A failing or auth-failed source.
    struct Problem {
        var name: String
        var provider: String
        var health: Health
        var failures: Int
        var lastError: String?
        var lastErrorAt: Date?
        /// When it is polled again; nil for an auth-failed one (it waits for a config change).
        var nextTry: Date?
    }

    /// One sink's outbox.
    struct SinkBacklog {
        var name: String
        /// Its type; nil for a sink no longer configured that still has deliveries.
        var type: String?
        var pending = 0
        var held = 0
        var dead = 0
        /// What holds the held ones, soonest end first.
        var holds: [(hold: OutboxEntry.Hold, count: Int)] = []
        /// Why its newest dead letter died.
        var lastDeadError: String?
    }

    var backend: String
    var location: String
    var now: Date
    var daemon: Daemon
    var enabledSources: Int
    var counts: [Health: Int]
    var problems: [Problem]
    var sinks: [SinkBacklog]
    var silences: [Silence]
    var notices: [PendingNotice]
    var events: [StateStore.HistoryEntry]

    /// How many events `status` shows.
    static let eventCount = 10
    /// How long since its last lease round a PostgreSQL instance still counts as running
    /// (the longest round is 10 s; `tidings check` uses the same window).
    static let liveWindow: TimeInterval = 30

    static func read(config: TidingsConfig, store: StateStore, lock: StateLock.Probe, now: Date = Date()) throws -> StatusReport {
        var daemon = Daemon(holdsLock: false, instances: [])
        if case .heldByDaemon(let pid, let since) = lock {
            daemon.holdsLock = true
            daemon.pid = pid
            daemon.since = since
            daemon.version = pid.flatMap { sameExecutable(pid: $0) == true ? TidingsVersion.string : nil }
        }
        if store.database.isShared {
            daemon.instances = try store.database.read { try LeaseBook.liveInstanceLeases($0, within: liveWindow, now: now) }
        }

        let statuses = try store.statuses()
        var counts = Dictionary(uniqueKeysWithValues: Health.allCases.map { ($0, 0) })
        var problems: [Problem] = []
        for s in config.sources {
            let st = statuses[s.name]
            let health = Health(s, st)
            counts[health, default: 0] += 1
            if health == .failing || health == .authFailed {
                problems.append(Problem(name: s.name, provider: s.provider, health: health, failures: st?.failures ?? 0,
                                        lastError: st?.lastError, lastErrorAt: st?.lastErrorAt,
                                        nextTry: health == .authFailed ? nil : st?.nextDue))
            }
        }

        let (backlog, held, deadErrors) = try store.database.read { db in
            (try OutboxStore.backlog(db, now: now), try OutboxStore.heldGroups(db, now: now), try OutboxStore.lastDeadErrors(db))
        }
        var sinks: [SinkBacklog] = config.sinks.map { SinkBacklog(name: $0.name, type: $0.type) }
        for name in backlog.keys.sorted() where !sinks.contains(where: { $0.name == name }) {
            sinks.append(SinkBacklog(name: name, type: nil))
        }
        for i in sinks.indices {
            let b = backlog[sinks[i].name] ?? OutboxBacklog()
            (sinks[i].pending, sinks[i].held, sinks[i].dead) = (b.pending, b.held, b.dead)
            sinks[i].holds = held.filter { $0.sink == sinks[i].name }.map { (hold: $0.hold, count: $0.count) }
            sinks[i].lastDeadError = deadErrors[sinks[i].name]
        }

        return StatusReport(
            backend: store.database.isShared ? "postgres" : "sqlite", location: store.path, now: now, daemon: daemon,
            enabledSources: config.sources.filter { $0.settings.enabled }.count, counts: counts, problems: problems, sinks: sinks,
            silences: try SilenceStore.all(store).filter { $0.state(at: now) == .active },
            notices: try NoticeBook.pending(store, now: now),
            events: try store.history(source: nil, limit: Self.eventCount))
    }

    /// Whether process `pid` runs the same executable file as this process; nil when /proc
    /// cannot tell (another user's process, no /proc).
    static func sameExecutable(pid: Int32) -> Bool? {
        var theirs = stat(), ours = stat()
        guard stat("/proc/\(pid)/exe", &theirs) == 0, stat("/proc/self/exe", &ours) == 0 else { return nil }
        return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino
    }

    // MARK: - Verdict

    /// Why the state needs attention (exit 1); empty when healthy (exit 0).
    var reasons: [String] {
        func count(_ n: Int, _ one: String, _ many: String) -> String { "\(n) \(n == 1 ? one : many)" }
        var out: [String] = []
        if let n = counts[.failing], n > 0 { out.append(count(n, "failing source", "failing sources")) }
        if let n = counts[.authFailed], n > 0 { out.append(count(n, "source", "sources") + " with rejected credentials (auth-failed)") }
        let dead = sinks.reduce(0) { $0 + $1.dead }
        if dead > 0 { out.append(count(dead, "dead letter", "dead letters")) }
        if !daemon.running && enabledSources > 0 {
            out.append("no daemon runs: " + count(enabledSources, "enabled source is", "enabled sources are") + " not polled")
        }
        return out
    }

    // MARK: - JSON

    var json: JSONValue {
        func time(_ d: Date?) -> JSONValue { d.map { .string(Timestamp.format($0)) } ?? .null }
        func number(_ n: Int) -> JSONValue { .number(Double(n)) }
        let reasons = self.reasons
        let daemonJSON: JSONValue = [
            "running": .bool(daemon.running),
            "pid": daemon.pid.map { number(Int($0)) } ?? .null,
            "since": time(daemon.since),
            "version": daemon.version.map(JSONValue.string) ?? .null,
            "instances": .array(daemon.instances.map { i -> JSONValue in
                ["instance": .string(i.label), "started_at": time(i.startedAt), "seen_at": time(i.seenAt),
                 "sources": number(i.sources), "sinks": number(i.sinks)]
            }),
        ]
        let sourcesJSON: JSONValue = [
            "total": number(counts.values.reduce(0, +)),
            "counts": .object(Dictionary(uniqueKeysWithValues: Health.allCases.map { ($0.rawValue, number(counts[$0] ?? 0)) })),
            "failing": .array(problems.map { p -> JSONValue in
                ["name": .string(p.name), "provider": .string(p.provider), "state": .string(p.health.rawValue),
                 "failures": number(p.failures), "last_error": p.lastError.map(JSONValue.string) ?? .null,
                 "last_error_at": time(p.lastErrorAt), "next_try": time(p.nextTry)]
            }),
        ]
        let outboxJSON = JSONValue.object(Dictionary(uniqueKeysWithValues: sinks.map { s -> (String, JSONValue) in
            (s.name, [
                "type": s.type.map(JSONValue.string) ?? .null,
                "pending": number(s.pending), "held": number(s.held), "dead": number(s.dead),
                "holds": .array(s.holds.map { h -> JSONValue in
                    ["until": time(h.hold.until), "reason": .string(h.hold.reason.rawValue), "count": number(h.count),
                     "description": .string(h.hold.description(now: now))]
                }),
                "last_dead_error": s.lastDeadError.map(JSONValue.string) ?? .null,
            ] as JSONValue)
        }))
        let eventsJSON = JSONValue.array(events.map { entry -> JSONValue in
            switch entry {
            case .event(let e, let silence): return SilenceMark.json(e, silencedBy: silence)
            case .unreadable(let id, let source, let reason): return ["id": .string(id), "source": .string(source), "unreadable": .string(reason)]
            }
        })
        return [
            "healthy": .bool(reasons.isEmpty),
            "attention": .array(reasons.map(JSONValue.string)),
            "state": ["backend": .string(backend), "location": .string(location)],
            "daemon": daemonJSON,
            "sources": sourcesJSON,
            "outbox": outboxJSON,
            "silences": .array(silences.map { $0.json(at: now) }),
            "notices": .array(notices.map(NoticesCommand.List.json)),
            "events": eventsJSON,
        ]
    }

    // MARK: - Text

    /// How many failing sources the text names (all of them are in the JSON).
    static let namedProblems = 20

    func text(color: Bool) -> [String] {
        func plural(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }
        let ago = SourcesCommand.ago, until = SourcesCommand.until
        var out: [String] = []

        out.append("state: \(TerminalText.line(location))")
        if daemon.holdsLock {
            var line = "daemon: running, PID \(daemon.pid.map { "\($0)" } ?? "not written yet")"
            if let since = daemon.since { line += ", since \(EventFormatter.localTime(since)) (\(ago(since)))" }
            line += daemon.version.map { ", version \($0)" } ?? ", version unknown (not this binary)"
            out.append(line)
        } else if daemon.instances.isEmpty {
            out.append("daemon: none" + (enabledSources > 0 ? " (\(plural(enabledSources, "enabled source")) not polled)" : ""))
        } else {
            out.append("daemon: none on this machine")
        }
        if backend == "postgres" {
            if daemon.instances.isEmpty { out.append("instances sharing the state: none") }
            else {
                out.append("instances sharing the state: \(daemon.instances.count)")
                for i in daemon.instances {
                    out.append("  \(TerminalText.line(i.label))  since \(EventFormatter.localTime(i.startedAt)), polls \(plural(i.sources, "source")), delivers to \(plural(i.sinks, "sink")), seen \(ago(i.seenAt))")
                }
            }
        }

        let total = counts.values.reduce(0, +)
        let breakdown = Health.allCases.compactMap { h -> String? in counts[h].flatMap { $0 > 0 ? "\($0) \(h.rawValue)" : nil } }
        out.append("sources: \(total)" + (breakdown.isEmpty ? "" : " (\(breakdown.joined(separator: ", ")))"))
        for p in problems.prefix(Self.namedProblems) {
            var line = "  \(p.health.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) \(TerminalText.line(p.name)) (\(TerminalText.line(p.provider)))"
            if p.health == .failing { line += ", \(plural(p.failures, "failure"))" }
            if let at = p.lastErrorAt { line += ", since \(ago(at))" }
            if let e = p.lastError { line += ": \(TerminalText.line(e))" }
            line += p.health == .authFailed ? "; waits for a config change" : p.nextTry.map { "; next try \(until($0))" } ?? ""
            out.append(line)
        }
        if problems.count > Self.namedProblems {
            out.append("  … and \(problems.count - Self.namedProblems) more (tidings sources)")
        }

        let busy = sinks.filter { $0.pending + $0.held + $0.dead > 0 }
        out.append("outbox: " + (busy.isEmpty ? "empty" : "\(busy.reduce(0) { $0 + $1.pending }) pending, \(busy.reduce(0) { $0 + $1.held }) held, \(busy.reduce(0) { $0 + $1.dead }) dead"))
        for s in busy {
            let parts = [(s.pending, "pending"), (s.held, "held"), (s.dead, "dead")].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }
            out.append("  \(TerminalText.line(s.name)) (\(s.type ?? "not configured")): \(parts.joined(separator: ", "))")
            for h in s.holds { out.append("    \(h.count) \(h.hold.description(now: now))") }
            if let e = s.lastDeadError { out.append("    last dead letter: \(TerminalText.line(e))") }
        }

        out.append("silences: " + (silences.isEmpty ? "none active" : "\(silences.count) active"))
        for s in silences {
            out.append("  \(s.id)  " + s.matchers.map { TerminalText.line($0.description) }.joined(separator: " ") + "  until \(EventFormatter.localTime(s.endsAt)) (\(until(s.endsAt)))")
        }

        out.append("notices: " + (notices.isEmpty ? "none pending" : "\(notices.count) pending"))
        let idLength = IDPrefix.length(for: notices.map(\.id))
        for n in notices { out.append("  " + NoticesCommand.List.textLine(n, idLength: idLength)) }

        out.append("last events:" + (events.isEmpty ? " none" : ""))
        let formatter = EventFormatter(color: color)
        for entry in events {
            switch entry {
            case .event(let e, let silence): out.append("  " + formatter.line(e, silencedBy: silence))
            case .unreadable(let id, let source, let reason):
                out.append("  event \(TerminalText.line(id)) of \(TerminalText.line(source)) cannot be read (\(TerminalText.line(reason)))")
            }
        }

        let reasons = self.reasons
        out.append(reasons.isEmpty ? "status: healthy" : "status: needs attention: \(reasons.joined(separator: "; "))")
        return out
    }
}
