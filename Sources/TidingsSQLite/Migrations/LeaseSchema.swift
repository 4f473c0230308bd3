import GRDB
import TidingsPluginAPI
import TidingsEngine

/// Tables for sharing one state between daemons (DESIGN §11). A SQLite state has one daemon
/// (``StateLock``), so it never fills them; they are there so that every backend has the same
/// schema and `tidings state migrate` and the unit suite see the same tables.
enum LeaseSchema {
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("v6-leases") { db in
            try db.execute(sql: """
                -- A running daemon: its id is new at each start.
                CREATE TABLE instance(
                  id TEXT PRIMARY KEY,
                  host TEXT NOT NULL,
                  pid INTEGER NOT NULL,
                  started_at DOUBLE NOT NULL,
                  seen_at DOUBLE NOT NULL,      -- its last lease round (heartbeat)
                  stopped_at DOUBLE             -- set when it stopped cleanly
                );
                -- Who polls a source ('source:NAME') or delivers to a sink ('sink:NAME'), until when.
                CREATE TABLE lease(
                  name TEXT PRIMARY KEY,
                  owner TEXT,                   -- instance.id; NULL when released
                  expires_at DOUBLE NOT NULL DEFAULT 0,
                  length DOUBLE NOT NULL DEFAULT 0,  -- seconds a renewal extends it by
                  taken_at DOUBLE
                );
                CREATE INDEX lease_by_owner ON lease(owner);
                """)
        }
    }
}
