import FoundationEssentials
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// The state as the daemon reports it (DESIGN §8): each source's health and each sink's
/// outbox backlog, read in one go for the `STATUS=` line and the gauges behind `/metrics`.
package struct StateSnapshot {
    package var health: [String: StoredHealth]
    package var backlog: [String: OutboxBacklog]

    private init(health: [String: StoredHealth], backlog: [String: OutboxBacklog]) {
        self.health = health
        self.backlog = backlog
    }

    /// Both in one read, on the state backend's threads (not the cooperative pool).
    /// `problemsOnly`: ``health`` holds only the sources that can be failing (what the status line
    /// counts; ``StateStore/storedHealth(_:problemsOnly:)``), not every stored source (what
    /// ``exportHealth(of:)`` needs).
    package static func read(_ store: StateStore, problemsOnly: Bool = false) async throws -> StateSnapshot {
        let now = Date()
        let (health, backlog) = try await store.database.read { db in
            (try StateStore.storedHealth(db, problemsOnly: problemsOnly), try OutboxStore.backlog(db, now: now))
        }
        return StateSnapshot(health: health, backlog: backlog)
    }

    /// The outbox gauges: every configured sink (0 when it has nothing), and any other sink
    /// the outbox still holds deliveries for.
    package func exportBacklog(sinks: [SinkConfig]) {
        var all = backlog
        for s in sinks where all[s.name] == nil { all[s.name] = OutboxBacklog() }
        TidingsMetrics.outbox(all)
    }

    /// ``exportHealth(of:)`` from the stored rows read `page` at a time, not all at once (issue 33:
    /// at 100,000 sources the whole read was the daemon's peak, 45 MB above the load's).
    package static func exportHealth(of config: TidingsConfig, from store: StateStore, page: Int = 10_000) async throws {
        var after: String? = nil
        while true {
            let from = after
            let rows = try await store.database.read { db in try StateStore.storedHealth(db, after: from, limit: page) }
            StateSnapshot(health: Dictionary(rows, uniquingKeysWith: { first, _ in first }), backlog: [:]).exportHealth(of: config)
            guard rows.count == page, let last = rows.last else { return }
            after = last.0
        }
    }

    /// The health gauges of the polled sources, as stored (before their next poll says more).
    package func exportHealth(of config: TidingsConfig) {
        for s in config.sources where s.settings.enabled {
            guard let h = health[s.name] else { continue }
            TidingsMetrics.sourceHealth(s.name, SourceHealth(s, h), lastSuccess: h.lastSuccess)
        }
    }
}

/// The `STATUS=` line: `polling 100 sources (2 failing), 3 sinks, 5 queued` (and `, 4 held`
/// when quiet hours or group_wait hold some, `, 1 dead` when there are dead letters, `, 2 polls
/// overrunning` when polls run past their timeout). Without a snapshot (the state could not be read) only what
/// the configuration says: `polling 100 sources, 3 sinks`. While polls are paused it begins
/// `paused (network offline): 100 sources` instead.
package struct DaemonStatus: Equatable, CustomStringConvertible {
    /// What the state says.
    package struct Counts: Equatable {
        var failing: Int
        var queued: Int
        var held: Int
        var dead: Int
    }
    package var sources: Int
    package var sinks: Int
    package var counts: Counts?
    package var pause: PollPause?
    /// Polls running past their timeout (``PollOverruns``).
    package var overrunning = 0

    package init(_ config: TidingsConfig, _ snapshot: StateSnapshot?, pause: PollPause?, overrunning: Int = 0) {
        self.pause = pause
        self.overrunning = overrunning
        // Counted in place: a filtered copy of the sources (~500 bytes each) every status
        // interval was the daemon's largest passing allocation (4.9 MB at 10,000 sources).
        var polled = 0
        var failing = 0
        for source in config.sources where source.settings.enabled {
            polled += 1
            if let snapshot, SourceHealth(source, snapshot.health[source.name]).isFailing { failing += 1 }
        }
        sources = polled
        sinks = config.sinks.count
        counts = snapshot.map { s in
            Counts(
                failing: failing,
                queued: s.backlog.values.reduce(0) { $0 + $1.pending }, held: s.backlog.values.reduce(0) { $0 + $1.held },
                dead: s.backlog.values.reduce(0) { $0 + $1.dead })
        }
    }

    package var description: String {
        func count(_ n: Int, _ what: String) -> String { "\(n) \(what)\(n == 1 ? "" : "s")" }
        let polling = pause.map { "paused (\($0.rawValue)): " } ?? "polling "
        let overruns = overrunning > 0 ? ", \(count(overrunning, "poll")) overrunning" : ""
        guard let c = counts else { return "\(polling)\(count(sources, "source")), \(count(sinks, "sink"))" + overruns }
        return "\(polling)\(count(sources, "source")) (\(c.failing) failing), \(count(sinks, "sink")), \(c.queued) queued"
            + (c.held > 0 ? ", \(c.held) held" : "") + (c.dead > 0 ? ", \(c.dead) dead" : "") + overruns
    }
}
