import FoundationEssentials
import Glibc
import Logging
import TidingsEngine
import TidingsPluginAPI

/// The SQLite backend of ``StateStore``: the file `DIR/tidings.sqlite` (SQLite's C API, WAL) and its
/// migrations (DESIGN §11; the PostgreSQL backend is TidingsPostgres).
extension StateStore {
    /// Opens (or creates) `DIR/tidings.sqlite`, once ``StateDirectory`` found the directory and
    /// files safe. A file that is not a readable SQLite database is moved aside
    /// (`tidings.sqlite.corrupt-TIMESTAMP`) and a fresh one started, whose first polls are baselines.
    package static func open(directory: String, logger: Logger) throws -> StateStore {
        let path = try StateDirectory.prepare(directory)
        do {
            return try StateStore(path: path)
        } catch let error as SQLiteError where error.isUnreadable {
            let aside = "\(path).corrupt-\(Int(Date().timeIntervalSince1970))"
            logger.error(
                "state database \(path) is unreadable (\(error.message)); moved it to \(aside) and started a fresh one: the next poll of every source is a silent baseline"
            )
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try? FileManager.default.moveItem(atPath: path + suffix, toPath: aside + suffix)
            }
            try StateDirectory.prepare(directory)
            return try StateStore(path: path)
        }
    }

    /// How long a write waits for SQLite's write lock (another process writing), in seconds.
    static let busyTimeout: Double = 10

    /// Opens (or creates) the SQLite state at `path`.
    package convenience init(path: String) throws {
        // Two processes opening a fresh file at once (the daemon starting while
        // `tidings outbox` runs) race on switching to WAL ("database is locked") and on the
        // migration. The loser retries and finds it all in place.
        var attempt = 0
        var opened: SQLiteStateDatabase
        while true {
            do {
                let database = try SQLiteStateDatabase(path: path, busyTimeout: Self.busyTimeout)
                try database.withWriter { db in
                    try Self.refuseNewerSchema(db, path: path)
                    try SQLiteSchema.migrate(db)
                }
                opened = database
                break
            } catch let e as SQLiteError where attempt < 5 && !e.isUnreadable {
                attempt += 1
                usleep(50_000 * UInt32(attempt))
            }
        }
        // Touch the schema so a corrupt file fails here, not mid-poll.
        let _: Int? = try opened.read { try $0.scalar("SELECT count(*) FROM sqlite_master") }
        self.init(database: opened)
    }

    /// Opening a newer schema would work on tables this version does not understand: refuse.
    private static func refuseNewerSchema(_ db: SQLiteConnection, path: String) throws {
        let known = Set(Schema.migrations.map(\.id))
        let unknown = try SQLiteSchema.applied(db).filter { !known.contains($0) }
        guard unknown.isEmpty else { throw NewerSchemaError(path: path, unknown: unknown.sorted()) }
    }
}
