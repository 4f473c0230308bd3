import FoundationEssentials
import Glibc
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI

/// What `tidings status` shows (DESIGN §13), read from the state with one query per section,
/// whatever the number of sources.
package struct StatusReport: Sendable {
    /// Who owns the state.
    package struct Daemon: Sendable {
        /// The daemon on this machine that holds the state lock (tidings.lock), if any.
        package var pid: Int32?
        /// When it took the lock: the lock file's modification time (it writes its PID then).
        package var since: Date?
        /// Its version, when it is known. The control protocol has no cheap request for it (its
        /// only op is `poll`), so this is the version of the binary running `tidings status`,
        /// given only when the daemon runs that same executable (/proc/PID/exe is the same file);
        /// nil when it runs another one (an upgrade replaced the file) or /proc does not say.
        package var version: String?
        /// Whether the lock is held (also when the PID is not written yet).
        package var holdsLock: Bool
        /// PostgreSQL (DESIGN §11): every instance that renewed its leases in the last 30 s,
        /// on any machine, with the leases it holds. Empty for a SQLite state.
        package var instances: [LeaseBook.LiveInstance]
        /// The lock holder's pulse (``DaemonPulse``: its scheduler's last pass, the polls
        /// overrunning their timeout); nil when there is none or it is not known.
        package var pulse: DaemonPulse?

        package var running: Bool { holdsLock || !instances.isEmpty }
    }

    /// A failing or auth-failed source.
    package struct Problem: Sendable {
        package var name: String
        package var provider: String
        package var health: SourceHealth
        package var failures: Int
        package var lastError: String?
        package var lastErrorAt: Date?
        /// When it is polled again; nil for an auth-failed one (it waits for a config change).
        package var nextTry: Date?
    }

    /// One sink's outbox.
    package struct SinkBacklog: Sendable {
        package var name: String
        /// Its type; nil for a sink no longer configured that still has deliveries.
        package var type: String?
        package var pending = 0
        package var held = 0
        package var dead = 0
        /// What holds the held ones, soonest end first.
        package var holds: [(hold: OutboxEntry.Hold, count: Int)] = []
        /// Why its newest dead letter died.
        package var lastDeadError: String?
    }

    package var backend: String
    package var location: String
    package var now: Date
    package var daemon: Daemon
    package var enabledSources: Int
    package var counts: [SourceHealth: Int]
    package var problems: [Problem]
    package var sinks: [SinkBacklog]
    package var silences: [Silence]
    package var notices: [PendingNotice]
    package var events: [StateStore.HistoryEntry]

    /// How many events `status` shows.
    package static let eventCount = 10
    /// How long since its last lease round a PostgreSQL instance still counts as running
    /// (the longest round is 10 s; `tidings check` uses the same window).
    package static let liveWindow: TimeInterval = 30

    /// `pulse`: what the daemon holding the lock wrote of its progress (kept only if one holds it).
    package static func read(
        config: TidingsConfig, store: StateStore, lock: StateLock.Probe, pulse: DaemonPulse? = nil, now: Date = Date()
    ) throws -> StatusReport {
        var daemon = Daemon(holdsLock: false, instances: [])
        if case .heldByDaemon(let pid, let since) = lock {
            daemon.holdsLock = true
            // Only this daemon's: an earlier daemon's file stays behind it. By PID (the lock's
            // `since` is a file time, not the daemon's clock); without both PIDs, by time.
            daemon.pulse = pulse.flatMap { p in
                if let pid, let writer = p.pid { return writer == pid ? p : nil }
                return since.map { p.at >= $0.addingTimeInterval(-1) } ?? true ? p : nil
            }
            daemon.pid = pid
            daemon.since = since
            daemon.version = pid.flatMap { sameExecutable(pid: $0) == true ? TidingsVersion.string : nil }
        }
        if store.database.isShared {
            daemon.instances = try store.database.read { try LeaseBook.liveInstanceLeases($0, within: liveWindow, now: now) }
        }

        let statuses = try store.statuses(countingItems: false)  // the report shows no item counts
        var counts = Dictionary(uniqueKeysWithValues: SourceHealth.allCases.map { ($0, 0) })
        var problems: [Problem] = []
        var enabled = 0
        for s in config.sources {
            if s.settings.enabled { enabled += 1 }
            let st = statuses[s.name]
            let health = SourceHealth(s, st)
            counts[health, default: 0] += 1
            if health.isFailing {
                problems.append(
                    Problem(
                        name: s.name, provider: s.provider, health: health, failures: st?.failures ?? 0,
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
            enabledSources: enabled, counts: counts, problems: problems, sinks: sinks,
            silences: try SilenceStore.all(store).filter { $0.state(at: now) == .active },
            notices: try NoticeBook.pending(store, now: now),
            events: try store.history(source: nil, limit: Self.eventCount))
    }

    /// Whether process `pid` runs the same executable file as this process; nil when /proc
    /// cannot tell (another user's process, no /proc).
    package static func sameExecutable(pid: Int32) -> Bool? {
        var theirs = stat()
        var ours = stat()
        guard stat("/proc/\(pid)/exe", &theirs) == 0, stat("/proc/self/exe", &ours) == 0 else { return nil }
        return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino
    }

    // MARK: - Verdict

    /// Why the state needs attention (exit 1); empty when healthy (exit 0).
    package var reasons: [String] {
        func count(_ n: Int, _ one: String, _ many: String) -> String { "\(n) \(n == 1 ? one : many)" }
        var out: [String] = []
        if let n = counts[.failing], n > 0 { out.append(count(n, "failing source", "failing sources")) }
        if let n = counts[.authFailed], n > 0 { out.append(count(n, "source", "sources") + " with rejected credentials (auth-failed)") }
        let dead = sinks.reduce(0) { $0 + $1.dead }
        if dead > 0 { out.append(count(dead, "dead letter", "dead letters")) }
        if let pulse = daemon.pulse { out += pulse.reasons(now: now) }
        if !daemon.running && enabledSources > 0 {
            out.append("no daemon runs: " + count(enabledSources, "enabled source is", "enabled sources are") + " not polled")
        }
        return out
    }

}
