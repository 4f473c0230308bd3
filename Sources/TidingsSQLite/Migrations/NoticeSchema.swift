import GRDB
import TidingsPluginAPI
import TidingsEngine

/// The `notice` table: broadcast notices (events of kind `notice`) and their lifecycle.
enum NoticeSchema {
    /// Registers migration "v2-notices" (after v1; never edit a shipped migration).
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("v2-notices") { db in
            try db.execute(sql: """
                CREATE TABLE notice(
                  source TEXT NOT NULL,
                  key TEXT NOT NULL,
                  event_id TEXT NOT NULL,
                  title TEXT NOT NULL,
                  body TEXT NOT NULL,
                  url TEXT,
                  severity TEXT NOT NULL,
                  created_at DOUBLE NOT NULL,
                  updated_at DOUBLE NOT NULL,
                  expires_at DOUBLE NOT NULL,
                  seen_at DOUBLE,
                  dismissed_at DOUBLE,
                  ended_at DOUBLE,
                  redelivered_at DOUBLE,
                  PRIMARY KEY(source, key)
                );
                CREATE INDEX notice_by_event ON notice(event_id);
                """)
        }
    }
}
