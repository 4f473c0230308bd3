import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// The last polls of each source in this process, for the daemon's status page: the last few
/// in full (when each ended, how long it took, how it went, how many events it made) and how
/// many polls and failures each clock hour of the last day had, for its chart. In memory only
/// (the state keeps a source's last success and last error, not each poll), and bounded by a
/// constant per source, however long the daemon runs: ``perSource`` polls and 24 hour counts
/// (under 1 KiB: 20 polls of 32 bytes and 48 counts in place; keeping a day of polls in full was 80 KiB per source polled every minute,
/// 800 MB for 10,000 such sources after a day and a half). A source a reload removed is forgotten.
package final class RecentPolls: Sendable {
    package struct Poll: Sendable, Equatable {
        /// When it ended.
        package var at: Date
        package var seconds: Double
        /// Why it failed; nil for a success.
        package var error: String?
        package var events: Int

        package init(at: Date, seconds: Double, error: String?, events: Int) {
            self.at = at
            self.seconds = seconds
            self.error = error
            self.events = events
        }
    }

    /// Polls and failures per clock hour (hours since 1970, UTC) of the last 24 a source was polled in.
    package struct Hours: Sendable, Equatable {
        /// The clock hour of the last slot.
        package var last = 0
        /// Polls in 0..<24, failures in 24..<48; oldest first: slot `i` is clock hour `last - 23 + i`.
        /// In place, not two arrays (two allocations a source; issue 33).
        private var counts = InlineArray<48, UInt16>(repeating: 0)

        package init() {}

        package var polls: [UInt16] { (0..<24).map { counts[$0] } }
        package var failed: [UInt16] { (24..<48).map { counts[$0] } }

        package static func == (a: Hours, b: Hours) -> Bool {
            a.last == b.last && (0..<48).allSatisfy { a.counts[$0] == b.counts[$0] }
        }

        mutating func count(at: Date, failed: Bool) {
            let hour = Int((at.timeIntervalSince1970 / 3600).rounded(.down))
            if hour > last {
                let shift = min(24, hour - last)
                for i in 0..<24 {
                    counts[i] = i + shift < 24 ? counts[i + shift] : 0
                    counts[24 + i] = i + shift < 24 ? counts[24 + i + shift] : 0
                }
                last = hour
            }
            let slot = 23 - (last - hour)
            guard slot >= 0 else { return }
            counts[slot] = counts[slot] == .max ? .max : counts[slot] + 1
            if failed { counts[24 + slot] = counts[24 + slot] == .max ? .max : counts[24 + slot] + 1 }
        }

        /// Each slot's clock hour as a moment (its middle, or `now` if that is later): for charts.
        package func slots(now: Date) -> [(at: Date, polls: Int, failed: Int)] {
            (0..<24).compactMap { i in
                guard counts[i] > 0 || counts[24 + i] > 0 else { return nil }
                let middle = Date(timeIntervalSince1970: Double(last - 23 + i) * 3600 + 1800)
                return (min(middle, now), Int(counts[i]), Int(counts[24 + i]))
            }
        }
    }

    /// A poll as kept: 32 bytes instead of 40 (its duration in single precision, its events
    /// counted to 4 billion).
    private struct Kept {
        var at: Double
        var seconds: Float
        var events: UInt32
        var error: String?

        init(_ p: Poll) {
            at = p.at.timeIntervalSince1970
            seconds = Float(p.seconds)
            events = UInt32(clamping: p.events)
            error = p.error
        }

        var poll: Poll { Poll(at: Date(timeIntervalSince1970: at), seconds: Double(seconds), error: error, events: Int(events)) }
    }

    private struct Log {
        /// Oldest first; its array grows to ``perSource`` exactly (doubling, it reached 32).
        var last: [Kept] = []
        var hours = Hours()
    }

    /// What ``TidingsMetrics/polled(_:_:accounting:seconds:now:)`` records into.
    package static let shared = RecentPolls()
    /// Polls kept in full per source (the source's page lists them).
    package static let perSource = 20

    private let logs = Mutex<[String: Log]>([:])

    package init() {}

    package func record(_ source: String, _ poll: Poll) {
        logs.withLock { all in
            var log = all.removeValue(forKey: source) ?? Log()
            if log.last.count >= Self.perSource { log.last.removeFirst(log.last.count - Self.perSource + 1) }
            if log.last.count == log.last.capacity { log.last.reserveCapacity(min(Self.perSource, max(2, 2 * log.last.count))) }
            log.last.append(Kept(poll))
            log.hours.count(at: poll.at, failed: poll.error != nil)
            all[source] = log
        }
    }

    /// The last polls of `source` this process made (at most ``perSource``), oldest first.
    package func of(_ source: String) -> [Poll] { logs.withLock { $0[source]?.last.map(\.poll) ?? [] } }

    /// Polls and failures of `source` per clock hour of the last day.
    package func hours(_ source: String) -> Hours { logs.withLock { $0[source]?.hours ?? Hours() } }

    package func forget(_ sources: some Sequence<String>) {
        logs.withLock { all in for s in sources { all[s] = nil } }
    }
}
