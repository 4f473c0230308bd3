import FoundationEssentials
import Glibc
import GRDB
import Logging
import TidingsEngine
import TidingsPluginAPI

/// The SQLite backend of ``StateStore``: the file `DIR/tidings.sqlite` (GRDB, WAL) and its
/// migrations (DESIGN §11; the PostgreSQL backend is TidingsPostgres).
extension StateStore {
    /// Opens (or creates) `DIR/tidings.sqlite`, once ``StateDirectory`` found the directory and
    /// files safe. A file that is not a readable SQLite database is moved aside
    /// (`tidings.sqlite.corrupt-TIMESTAMP`) and a fresh one started, whose first polls are baselines.
    package static func open(directory: String, logger: Logger) throws -> StateStore {
        let path = try StateDirectory.prepare(directory)
        do {
            return try StateStore(path: path)
        } catch let error as DatabaseError where [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) {
            let aside = "\(path).corrupt-\(Int(Date().timeIntervalSince1970))"
            logger.error(
                "state database \(path) is unreadable (\(error.message ?? "\(error.resultCode)")); moved it to \(aside) and started a fresh one: the next poll of every source is a silent baseline"
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
        var config = Configuration()
        config.busyMode = .timeout(Self.busyTimeout)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        // Two processes opening a fresh file at once (the daemon starting while
        // `tidings outbox` runs) race on switching to WAL ("database is locked") and on the
        // migration ("table already exists"). The loser retries and finds it all in place.
        var attempt = 0
        var opened: DatabasePool
        while true {
            do {
                let pool = try DatabasePool(path: path, configuration: config)
                try Self.refuseNewerSchema(pool, path: path)
                try Self.migrator.migrate(pool)
                opened = pool
                break
            } catch let e as DatabaseError where attempt < 5 && ![.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(e.resultCode) {
                attempt += 1
                usleep(50_000 * UInt32(attempt))
            }
        }
        // Touch the schema so a corrupt file fails here, not mid-poll.
        _ = try opened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM sqlite_master") }
        self.init(database: SQLiteStateDatabase(pool: opened, path: path, busyTimeout: Self.busyTimeout))
    }

    /// Opening a newer schema would work on tables this version does not understand: refuse.
    private static func refuseNewerSchema(_ pool: DatabasePool, path: String) throws {
        let migrator = Self.migrator
        guard try pool.read(migrator.hasBeenSuperseded) else { return }
        let applied = try pool.read(migrator.appliedIdentifiers)
        throw NewerSchemaError(path: path, unknown: applied.subtracting(migrator.migrations).sorted())
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        SQLiteSchema.register(&m)
        return m
    }
}
