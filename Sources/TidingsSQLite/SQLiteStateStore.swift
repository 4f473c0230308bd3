import Foundation
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
    public static func open(directory: String, logger: Logger) throws -> StateStore {
        let path = try StateDirectory.prepare(directory)
        do {
            return try StateStore(path: path)
        } catch let error as DatabaseError where [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) {
            let aside = "\(path).corrupt-\(Int(Date().timeIntervalSince1970))"
            logger.error("state database \(path) is unreadable (\(error.message ?? "\(error.resultCode)")); moved it to \(aside) and started a fresh one: the next poll of every source is a silent baseline")
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
    public convenience init(path: String) throws {
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
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE source_state(
                  source TEXT PRIMARY KEY,
                  provider TEXT NOT NULL,
                  etag TEXT,
                  last_modified TEXT,
                  baseline_at DOUBLE,
                  last_poll DOUBLE,
                  last_success DOUBLE,
                  last_error TEXT,
                  last_error_at DOUBLE,
                  failures INTEGER NOT NULL DEFAULT 0,
                  error_reported INTEGER NOT NULL DEFAULT 0,
                  auth_failed_hash TEXT,
                  next_due DOUBLE
                );
                CREATE TABLE item(
                  source TEXT NOT NULL,
                  key TEXT NOT NULL,
                  kind TEXT NOT NULL,
                  fingerprint TEXT NOT NULL,
                  state TEXT NOT NULL,
                  first_seen DOUBLE NOT NULL,
                  changed_at DOUBLE NOT NULL,
                  missing_since DOUBLE,
                  snapshot TEXT NOT NULL,
                  PRIMARY KEY(source, key)
                ) WITHOUT ROWID;
                CREATE TABLE event(
                  seq INTEGER PRIMARY KEY AUTOINCREMENT,
                  id TEXT NOT NULL UNIQUE,
                  source TEXT NOT NULL,
                  kind TEXT NOT NULL,
                  type TEXT NOT NULL,
                  key TEXT NOT NULL,
                  observed_at DOUBLE NOT NULL,
                  payload TEXT NOT NULL
                );
                CREATE INDEX event_by_source ON event(source, seq);
                CREATE INDEX event_by_time ON event(observed_at);
                CREATE TABLE delivery(
                  id INTEGER PRIMARY KEY AUTOINCREMENT,
                  event_seq INTEGER NOT NULL REFERENCES event(seq) ON DELETE CASCADE,
                  sink TEXT NOT NULL,
                  batch TEXT NOT NULL,
                  status TEXT NOT NULL,
                  attempts INTEGER NOT NULL DEFAULT 0,
                  next_attempt DOUBLE NOT NULL,
                  created_at DOUBLE NOT NULL,
                  last_error TEXT
                );
                CREATE INDEX delivery_by_sink ON delivery(sink, status, id);
                """)
        }
        NoticeSchema.register(&m)
        ScheduleSchema.register(&m)
        m.registerMigration("v3-item-content-hash") { db in
            // The hash of what an item shows, where it differs from its fingerprint (custom
            // fingerprints): a poll with new text but the same fingerprint refreshes the row.
            try db.execute(sql: "ALTER TABLE item ADD COLUMN content_hash TEXT")
        }
        AttentionSchema.register(&m)
        ReminderSchema.register(&m)
        LeaseSchema.register(&m)
        ScheduleSchema.registerMinimumInterval(&m)
        return m
    }
}
