import GRDB
import TidingsPluginAPI
import TidingsEngine

/// The `reminder` table's count (after v4-attention created the table).
enum ReminderSchema {
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("v5-reminders") { db in
            // How many reminders for the item went out through the route since its last change
            // (the event's `data.reminder_count`).
            try db.execute(sql: "ALTER TABLE reminder ADD COLUMN count INTEGER NOT NULL DEFAULT 0")
        }
    }
}
