import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// Polls still running past their timeout: ``PollRunner`` registers each poll's body while it
/// runs, with the moment its timeout gives up on it (its `timeout` and the second of grace
/// after it). The timeout fails the poll and the schedule goes on, but a body that does not
/// stop (CPU-bound parsing, a blocked thread) keeps running and holding a thread of the pool
/// the daemon needs: such a poll is *overrunning* until its body returns. Shared by the
/// runners of all generations (a body outlives a reload).
package final class PollOverruns: Sendable {
    private struct Running: Sendable {
        var source: String
        var deadline: Date
    }
    private let state = Mutex<(next: UInt64, running: [UInt64: Running])>((0, [:]))

    package init() {}

    /// A poll body of `source` starts; its timeout gives up at `deadline`.
    func begin(_ source: String, deadline: Date) -> UInt64 {
        state.withLock { s in
            s.next &+= 1
            s.running[s.next] = Running(source: source, deadline: deadline)
            return s.next
        }
    }

    /// The body of poll `id` returned (in time or not).
    func end(_ id: UInt64) {
        _ = state.withLock { $0.running.removeValue(forKey: id) }
    }

    /// The sources whose poll bodies run past their deadline at `now`, sorted (one name per
    /// overrunning poll: a source polled again meanwhile may overrun twice).
    package func overrunning(at now: Date) -> [String] {
        state.withLock { s in s.running.values.filter { $0.deadline < now }.map(\.source) }.sorted()
    }
}

/// What the daemon says of its own progress (DESIGN §8): when its scheduler loop last ran
/// (it runs at least once a second) and which polls overrun their timeout. Kept live by
/// ``PulseKeeper``; written every few seconds to `tidings.pulse` in the state directory for
/// `tidings status`, which has no other way into the daemon.
package struct DaemonPulse: Sendable, Equatable {
    /// The scheduler loop's last pass; nil before the first.
    package var tickAt: Date?
    /// ``PollOverruns/overrunning(at:)`` at `at`.
    package var overrunning: [String]
    /// When this was taken.
    package var at: Date
    /// The daemon that wrote it: `tidings status` keeps only the pulse of the daemon holding the
    /// lock (an earlier daemon's file stays behind it). A PID, not a time: the lock's time is a
    /// file's, and file times and the daemon's clock need not agree.
    package var pid: Int32?
    /// How late polls started, 99th percentile over the last minute (``LatenessWindow``);
    /// nil when none started (or the daemon is too old to say).
    package var lateness: Double?

    package init(tickAt: Date?, overrunning: [String], at: Date, pid: Int32? = nil, lateness: Double? = nil) {
        self.lateness = lateness
        self.tickAt = tickAt
        self.overrunning = overrunning
        self.at = at
        self.pid = pid
    }

    /// A scheduler loop that has not run for this long is stalled: `/-/healthy` answers 503
    /// and `tidings status` needs attention.
    package static let stallAfter: TimeInterval = 30
    package static let fileName = "tidings.pulse"
    /// Polls starting later than this (p99 over the last minute): the daemon cannot keep up.
    package static let behindAfter: TimeInterval = 5

    /// "behind by …" when the daemon cannot keep up (``behindAfter``), or nil.
    package var behind: String? {
        guard let lateness, lateness > Self.behindAfter else { return nil }
        return "behind by \(DurationParser.format(lateness)) (polls start that late, p99 over the last minute: too many sources or too little CPU for max_concurrent)"
    }

    package static func path(in stateDirectory: String) -> String { "\(stateDirectory)/\(fileName)" }

    /// Why the scheduler counts as stalled at `now` (how long since its last pass), or nil.
    package func stall(now: Date) -> String? {
        guard let tickAt, now.timeIntervalSince(tickAt) > Self.stallAfter else { return nil }
        return "the daemon's scheduler has not run for \(DurationParser.format(now.timeIntervalSince(tickAt))) (stalled; polls are not started)"
    }

    /// The sources of ``overrunning``, each once, sorted.
    package var overrunningSources: [String] { Array(Set(overrunning)).sorted() }

    /// `tidings status`'s reasons for attention from this pulse.
    package func reasons(now: Date) -> [String] {
        var out: [String] = []
        if !overrunning.isEmpty {
            let n = overrunning.count
            let names = overrunningSources
            let shown = names.prefix(5).joined(separator: ", ") + (names.count > 5 ? ", …" : "")
            out.append("\(n) poll\(n == 1 ? "" : "s") running past \(n == 1 ? "its" : "their") timeout (\(shown))")
        }
        if let stall = stall(now: now) { out.append(stall) }
        if let behind { out.append("the daemon's scheduler is \(behind)") }
        return out
    }

    package var json: JSONValue {
        [
            "tick_at": tickAt.map { .string(Timestamp.format($0)) } ?? .null,
            "overrunning": .array(overrunning.map(JSONValue.string)),
            "at": .string(Timestamp.format(at)),
            "pid": pid.map { .number(Double($0)) } ?? .null,
            "lateness_p99": lateness.map { .number($0) } ?? .null,
        ]
    }

    package init?(json: JSONValue) {
        guard let atText = json["at"]?.stringValue, let at = Timestamp.parse(atText), case .array(let names)? = json["overrunning"] else {
            return nil
        }
        self.at = at
        overrunning = names.compactMap(\.stringValue)
        tickAt = json["tick_at"]?.stringValue.flatMap(Timestamp.parse)
        if case .number(let n)? = json["pid"], let pid = Int32(exactly: n) { self.pid = pid }
        if case .number(let n)? = json["lateness_p99"] { lateness = n }
    }

    /// The pulse the daemon of `stateDirectory` wrote last; nil when there is none (no daemon,
    /// or one too old to write it) or it cannot be read.
    package static func read(stateDirectory: String) -> DaemonPulse? {
        guard let data = FileManager.default.contents(atPath: path(in: stateDirectory)),
            let value = try? JSONValue.parse(data)
        else { return nil }
        return DaemonPulse(json: value)
    }

    /// Writes it for `tidings status` (replacing the old file at once: a reader never sees half).
    package func write(stateDirectory: String) throws {
        let target = Self.path(in: stateDirectory)
        try Data(json.jsonString().utf8).write(to: URL(fileURLWithPath: target), options: .atomic)
    }
}

/// The live pulse of a daemon: the scheduler loop ticks it, the runners of every generation
/// register their polls in ``overruns``.
package final class PulseKeeper: Sendable {
    package let overruns = PollOverruns()
    /// The schedulers of every generation record their polls' lateness here.
    package let lateness = LatenessWindow()
    private let lastTick = Mutex<Date?>(nil)
    private let pid = getpid()

    package init() {}

    /// A pass of the scheduler loop.
    package func tick(_ now: Date = Date()) { lastTick.withLock { $0 = now } }

    package func pulse(_ now: Date = Date()) -> DaemonPulse {
        DaemonPulse(
            tickAt: lastTick.withLock { $0 }, overrunning: overruns.overrunning(at: now), at: now, pid: pid,
            lateness: lateness.p99(now: now))
    }
}
