import GRDB
import TidingsPluginAPI
import TidingsEngine

/// The state's tables and columns for DESIGN §10: held and grouped deliveries, silences,
/// reminders.
enum AttentionSchema {
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("v4-attention") { db in
            try db.execute(sql: """
                -- A delivery held for quiet hours or collected for group_wait is not sent before
                -- hold_until; hold says why ('quiet' or 'group'). Rows held together share their
                -- batch, and go out together as one digest.
                ALTER TABLE delivery ADD COLUMN hold_until DOUBLE;
                ALTER TABLE delivery ADD COLUMN hold TEXT;
                -- The silence that kept an event from its sinks (the event stays in history).
                ALTER TABLE event ADD COLUMN silenced_by TEXT;
                CREATE TABLE silence(
                  id TEXT PRIMARY KEY,
                  matchers TEXT NOT NULL,          -- JSON array of {"name","op","value"}
                  comment TEXT NOT NULL DEFAULT '',
                  created_by TEXT NOT NULL,
                  created_at DOUBLE NOT NULL,
                  starts_at DOUBLE NOT NULL,
                  ends_at DOUBLE NOT NULL,
                  silenced INTEGER NOT NULL DEFAULT 0  -- events it kept from their sinks
                );
                CREATE INDEX silence_by_end ON silence(ends_at);
                -- When a reminder for an item last went out through a route (repeat_interval).
                CREATE TABLE reminder(
                  source TEXT NOT NULL,
                  key TEXT NOT NULL,
                  route TEXT NOT NULL,
                  last_at DOUBLE NOT NULL,
                  PRIMARY KEY(source, key, route)
                ) WITHOUT ROWID;
                """)
        }
    }
}
