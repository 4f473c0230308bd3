import GRDB
import TidingsPluginAPI
import TidingsEngine

/// Schedule columns of `source_state` beyond v1.
enum ScheduleSchema {
    /// Registers migration "v3-schedule-not-before" (never edit a shipped migration):
    /// `not_before`, the earliest time a server allowed the next poll (its `Retry-After`).
    /// With it a stored due time can be judged against new settings on reload or restart:
    /// one set by the server is honoured, one set by a longer interval is not.
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("v3-schedule-not-before") { db in
            try db.execute(sql: "ALTER TABLE source_state ADD COLUMN not_before DOUBLE")
        }
    }

    /// Registers migration "v7-schedule-min-interval": `min_interval`, the remote's own minimum
    /// time between polls (``PollResult/minimumInterval``, e.g. GitHub's `X-Poll-Interval`),
    /// from the last successful poll. Registered after every earlier migration.
    static func registerMinimumInterval(_ m: inout DatabaseMigrator) {
        m.registerMigration("v7-schedule-min-interval") { db in
            try db.execute(sql: "ALTER TABLE source_state ADD COLUMN min_interval DOUBLE")
        }
    }
}
