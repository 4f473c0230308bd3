import FoundationEssentials
import TidingsPluginAPI

/// A source's schedule as the state remembers it, and the rule for resuming it under the
/// settings now loaded (after a reload or restart; DESIGN §7).
///
/// A stored due time is kept only if the current settings could have produced it: after a
/// success, within the jittered interval; after k failures, within the jittered backoff for
/// k. Otherwise (e.g. the interval went from 30m to 3s) the source is rescheduled within the
/// new wait. A server's `Retry-After` (`notBefore`) is honoured either way: never sooner.
package struct StoredSchedule: Sendable, Equatable {
    package var nextDue: Date?
    /// Consecutive failed polls.
    package var failures: Int
    /// The earliest time the server allowed (`Retry-After`), if it said so.
    package var notBefore: Date?

    package init(nextDue: Date?, failures: Int = 0, notBefore: Date? = nil) {
        self.nextDue = nextDue
        self.failures = failures
        self.notBefore = notBefore
    }

    /// When to poll first. `spread`: the start-up spread window for a new or overdue source;
    /// `unit`: a uniform draw in [0, 1).
    package func firstDue(settings: SourceSettings, now: Date, spread: TimeInterval, unit: Double) -> Date {
        let earliest = max(now, notBefore ?? now)
        guard let due = nextDue, due > now else {
            // New, or overdue after downtime: soon, spread out.
            return max(now.addingTimeInterval(spread * unit), earliest)
        }
        if due.timeIntervalSince(now) <= wait(settings, unit: 1) { return max(due, earliest) }
        return max(now.addingTimeInterval(wait(settings, unit: unit)), earliest)
    }

    /// The wait the settings give after the stored outcome (`unit` 1: the longest).
    private func wait(_ s: SourceSettings, unit: Double) -> TimeInterval {
        if failures == 0 { return Backoff.afterSuccess(interval: s.interval, jitter: s.jitter, unit: unit) }
        return Backoff.afterFailure(interval: s.interval, failures: failures, maxBackoff: s.maxBackoff, jitter: s.jitter, unit: unit)
    }
}

extension StoredSchedule {
    /// The stored schedules of `names`, in their order (nil: no row), and the configuration
    /// hash of each of them whose credentials were rejected (``SourceHealth/authFailed``: not
    /// scheduled). Read ``SQL/listChunk`` names to a statement: one statement for 100,000
    /// names would pass SQLite's and PostgreSQL's limits on parameters, and a dictionary of
    /// every row cost tens of MB at the start of a daemon (issue 33).
    static func all(_ db: any SQLConnection, names: [String]) throws -> (schedules: [StoredSchedule?], authFailed: [String: String]) {
        var schedules = [StoredSchedule?](repeating: nil, count: names.count)
        var authFailed: [String: String] = [:]
        var offset = 0
        for chunk in SQL.chunks(names) {
            var at: [String: Int] = [:]
            for (k, name) in chunk.enumerated() { at[name] = offset + k }
            let sql = "SELECT source, next_due, failures, not_before, auth_failed_hash FROM source_state WHERE source IN (\(SQL.placeholders(chunk.count)))"
            for r in try db.fetchAll(sql, chunk.map(\.sqlValue)) {
                let name: String = try r[0]
                guard let i = at[name] else { continue }
                schedules[i] = StoredSchedule(nextDue: try r[1], failures: try r[2], notBefore: try r[3])
                if let hash: String = try r[4] { authFailed[name] = hash }
            }
            offset += chunk.count
        }
        return (schedules, authFailed)
    }
}
