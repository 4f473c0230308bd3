import GRDB
import TidingsEngine

/// ``Schema`` in SQLite's words: one GRDB migration per entry, under the id it shipped with.
enum SQLiteSchema {
    /// Registers every migration of ``Schema/migrations``, oldest first.
    static func register(_ m: inout DatabaseMigrator) {
        for migration in Schema.migrations {
            let statements = migration.changes.map { Schema.sql($0, .sqlite) }
            m.registerMigration(migration.id) { db in
                for statement in statements { try db.execute(sql: statement) }
            }
        }
    }
}
