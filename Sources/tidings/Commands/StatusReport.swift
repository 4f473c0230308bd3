import FoundationEssentials
import Glibc
import TidingsApp
import TidingsEngine
import TidingsMonitoring
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// `tidings status`'s JSON and text of the ``StatusReport`` (the model is in TidingsMonitoring, shared with the status page).
extension StatusReport {
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
            "polls_overrunning": daemon.pulse.map { number($0.overrunning.count) } ?? .null,
            "overrunning": .array((daemon.pulse?.overrunning ?? []).map(JSONValue.string)),
            "scheduler_ran_at": time(daemon.pulse?.tickAt),
            "instances": .array(
                daemon.instances.map { i -> JSONValue in
                    [
                        "instance": .string(i.label), "started_at": time(i.startedAt), "seen_at": time(i.seenAt),
                        "sources": number(i.sources), "sinks": number(i.sinks),
                    ]
                }),
        ]
        let sourcesJSON: JSONValue = [
            "total": number(counts.values.reduce(0, +)),
            "counts": .object(Dictionary(uniqueKeysWithValues: SourceHealth.allCases.map { ($0.rawValue, number(counts[$0] ?? 0)) })),
            "failing": .array(
                problems.map { p -> JSONValue in
                    [
                        "name": .string(p.name), "provider": .string(p.provider), "state": .string(p.health.rawValue),
                        "failures": number(p.failures), "last_error": p.lastError.map(JSONValue.string) ?? .null,
                        "last_error_at": time(p.lastErrorAt), "next_try": time(p.nextTry),
                    ]
                }),
        ]
        let outboxJSON = JSONValue.object(
            Dictionary(
                uniqueKeysWithValues: sinks.map { s -> (String, JSONValue) in
                    (
                        s.name,
                        [
                            "type": s.type.map(JSONValue.string) ?? .null,
                            "pending": number(s.pending), "held": number(s.held), "dead": number(s.dead),
                            "holds": .array(
                                s.holds.map { h -> JSONValue in
                                    [
                                        "until": time(h.hold.until), "reason": .string(h.hold.reason.rawValue), "count": number(h.count),
                                        "description": .string(h.hold.description(now: now)),
                                    ]
                                }),
                            "last_dead_error": s.lastDeadError.map(JSONValue.string) ?? .null,
                        ] as JSONValue
                    )
                }))
        let eventsJSON = JSONValue.array(
            events.map { entry -> JSONValue in
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
        let ago = SourcesCommand.ago
        let until = SourcesCommand.until
        var out: [String] = []

        out.append("state: \(TerminalText.line(location))")
        if daemon.holdsLock {
            var line = "daemon: running, PID \(daemon.pid.map { "\($0)" } ?? "not written yet")"
            if let since = daemon.since { line += ", since \(EventFormatter.localTime(since)) (\(ago(since)))" }
            line += daemon.version.map { ", version \($0)" } ?? ", version unknown (not this binary)"
            out.append(line)
            if let pulse = daemon.pulse {
                let n = pulse.overrunning.count
                var polls = "  polls: \(n) running past \(n == 1 ? "its" : "their") timeout"
                if n > 0 { polls += " (\(pulse.overrunningSources.map(TerminalText.line).joined(separator: ", ")))" }
                if let tick = pulse.tickAt { polls += "; scheduler last ran \(ago(tick))" }
                out.append(polls)
            }
        } else if daemon.instances.isEmpty {
            out.append("daemon: none" + (enabledSources > 0 ? " (\(plural(enabledSources, "enabled source")) not polled)" : ""))
        } else {
            out.append("daemon: none on this machine")
        }
        if backend == "postgres" {
            if daemon.instances.isEmpty {
                out.append("instances sharing the state: none")
            } else {
                out.append("instances sharing the state: \(daemon.instances.count)")
                for i in daemon.instances {
                    out.append(
                        "  \(TerminalText.line(i.label))  since \(EventFormatter.localTime(i.startedAt)), polls \(plural(i.sources, "source")), delivers to \(plural(i.sinks, "sink")), seen \(ago(i.seenAt))"
                    )
                }
            }
        }

        let total = counts.values.reduce(0, +)
        let breakdown = SourceHealth.allCases.compactMap { h -> String? in counts[h].flatMap { $0 > 0 ? "\($0) \(h.rawValue)" : nil } }
        out.append("sources: \(total)" + (breakdown.isEmpty ? "" : " (\(breakdown.joined(separator: ", ")))"))
        for p in problems.prefix(Self.namedProblems) {
            var line =
                "  \(TextEdits.padded(p.health.rawValue, toUTF16: 11)) \(TerminalText.line(p.name)) (\(TerminalText.line(p.provider)))"
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
        out.append(
            "outbox: "
                + (busy.isEmpty
                    ? "empty"
                    : "\(busy.reduce(0) { $0 + $1.pending }) pending, \(busy.reduce(0) { $0 + $1.held }) held, \(busy.reduce(0) { $0 + $1.dead }) dead"))
        for s in busy {
            let parts = [(s.pending, "pending"), (s.held, "held"), (s.dead, "dead")].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }
            out.append("  \(TerminalText.line(s.name)) (\(s.type ?? "not configured")): \(parts.joined(separator: ", "))")
            for h in s.holds { out.append("    \(h.count) \(h.hold.description(now: now))") }
            if let e = s.lastDeadError { out.append("    last dead letter: \(TerminalText.line(e))") }
        }

        out.append("silences: " + (silences.isEmpty ? "none active" : "\(silences.count) active"))
        for s in silences {
            out.append(
                "  \(s.id)  " + s.matchers.map { TerminalText.line($0.description) }.joined(separator: " ")
                    + "  until \(EventFormatter.localTime(s.endsAt)) (\(until(s.endsAt)))")
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
