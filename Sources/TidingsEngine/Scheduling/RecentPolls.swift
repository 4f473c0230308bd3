import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// The last polls of each source in this process, for the daemon's status page: when each
/// ended, how long it took, how it went and how many events it made. In memory only (the
/// state keeps a source's last success and last error, not each poll), and bounded: at most
/// ``perSource`` per source, and a source a reload removed is forgotten.
package final class RecentPolls: Sendable {
    package struct Poll: Sendable, Equatable {
        /// When it ended.
        package var at: Date
        package var seconds: Double
        /// Why it failed; nil for a success.
        package var error: String?
        package var events: Int
    }

    /// What ``TidingsMetrics/polled(_:_:accounting:seconds:now:)`` records into.
    package static let shared = RecentPolls()
    /// A day of polls every minute, and then some.
    package static let perSource = 2000

    private let polls = Mutex<[String: [Poll]]>([:])

    package init() {}

    package func record(_ source: String, _ poll: Poll) {
        polls.withLock { all in
            var list = all.removeValue(forKey: source) ?? []
            list.append(poll)
            if list.count > Self.perSource { list.removeFirst(list.count - Self.perSource) }
            all[source] = list
        }
    }

    /// The polls of `source` this process made, oldest first.
    package func of(_ source: String) -> [Poll] { polls.withLock { $0[source] ?? [] } }

    package func forget(_ sources: some Sequence<String>) {
        polls.withLock { all in for s in sources { all[s] = nil } }
    }
}
