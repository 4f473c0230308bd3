import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// The last polls of each source in this process, for the daemon's status page: the last few
/// in full (when each ended, how long it took, how it went, how many events it made) and how
/// many polls and failures each clock hour of the last day had, for its chart. In memory only
/// (the state keeps a source's last success and last error, not each poll), and bounded by a
/// constant per source, however long the daemon runs: ``perSource`` polls and 24 hour counts
/// (about 1 KiB; keeping a day of polls in full was 80 KiB per source polled every minute,
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
        /// Oldest first: slot `i` is clock hour `last - 23 + i`.
        package var polls = [UInt16](repeating: 0, count: 24)
        package var failed = [UInt16](repeating: 0, count: 24)

        package init() {}

        mutating func count(_ poll: Poll) {
            let hour = Int((poll.at.timeIntervalSince1970 / 3600).rounded(.down))
            if hour > last {
                let shift = min(24, hour - last)
                polls.removeFirst(shift)
                polls.append(contentsOf: repeatElement(0, count: shift))
                failed.removeFirst(shift)
                failed.append(contentsOf: repeatElement(0, count: shift))
                last = hour
            }
            let slot = 23 - (last - hour)
            guard slot >= 0 else { return }
            polls[slot] = polls[slot] &+ (polls[slot] == .max ? 0 : 1)
            if poll.error != nil { failed[slot] = failed[slot] &+ (failed[slot] == .max ? 0 : 1) }
        }

        /// Each slot's clock hour as a moment (its middle, or `now` if that is later): for charts.
        package func slots(now: Date) -> [(at: Date, polls: Int, failed: Int)] {
            (0..<24).compactMap { i in
                guard polls[i] > 0 || failed[i] > 0 else { return nil }
                let middle = Date(timeIntervalSince1970: Double(last - 23 + i) * 3600 + 1800)
                return (min(middle, now), Int(polls[i]), Int(failed[i]))
            }
        }
    }

    private struct Log {
        var last: [Poll] = []
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
            log.last.append(poll)
            if log.last.count > Self.perSource { log.last.removeFirst(log.last.count - Self.perSource) }
            log.hours.count(poll)
            all[source] = log
        }
    }

    /// The last polls of `source` this process made (at most ``perSource``), oldest first.
    package func of(_ source: String) -> [Poll] { logs.withLock { $0[source]?.last ?? [] } }

    /// Polls and failures of `source` per clock hour of the last day.
    package func hours(_ source: String) -> Hours { logs.withLock { $0[source]?.hours ?? Hours() } }

    package func forget(_ sources: some Sequence<String>) {
        logs.withLock { all in for s in sources { all[s] = nil } }
    }
}
