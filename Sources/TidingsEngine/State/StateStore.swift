import FoundationEssentials
import Logging
import TidingsPluginAPI

/// The state: items, source status, events, the outbox, notices, silences and leases, in a
/// ``StateDatabase`` (the SQLite file in the state directory, or PostgreSQL: DESIGN §11).
///
/// All writes that belong to one poll happen in one transaction (see ``PollRecorder``).
package final class StateStore: Sendable {
    /// Where every statement goes (the storage seam).
    package let database: any StateDatabase
    /// For messages: the SQLite file, or the PostgreSQL URL without its password.
    package var path: String { database.location }

    package init(database: any StateDatabase) {
        self.database = database
    }

    /// The state was migrated by a newer tidings than this one (either backend).
    package struct NewerSchemaError: Error, CustomStringConvertible {
        /// The state file, or the PostgreSQL state's location.
        package var path: String
        /// The migrations this version does not know.
        package var unknown: [String]
        /// What the user can do instead.
        package var remedy = "Run that version, or move the file away to start afresh (each source's next poll is then a silent baseline)."
        package init(path: String, unknown: [String]) {
            self.path = path
            self.unknown = unknown
        }
        package var description: String {
            "\(path) was written by a newer version of tidings (schema migrations unknown here: \(unknown.joined(separator: ", "))); "
                + "refusing to open it. \(remedy)"
        }
    }
}
