import CSQLite
import TidingsEngine

/// ``Schema`` in SQLite's words: one migration per entry, recorded under the id it shipped with
/// in the table GRDB kept them in (`grdb_migrations`), so that every file GRDB migrated opens
/// and goes on.
enum SQLiteSchema {
    static let table = "grdb_migrations"

    /// The ids recorded in the file, known or not (none when the table is missing: a fresh file).
    static func applied(_ db: SQLiteConnection) throws -> [String] {
        let exists = try !db.fetchAll("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(table)]).isEmpty
        guard exists else { return [] }
        return try db.fetchAll("SELECT identifier FROM \(table) ORDER BY rowid", []).map { try $0[0] as String }
    }

    /// Applies every migration of ``Schema/migrations`` the file lacks, oldest first, each in
    /// its own transaction as GRDB's migrator did: foreign keys off, the changes, the id
    /// recorded, `PRAGMA foreign_key_check`, commit, foreign keys on again. A migration another
    /// process applied meanwhile is skipped.
    static func migrate(_ db: SQLiteConnection) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS \(table) (identifier TEXT NOT NULL PRIMARY KEY)")
        let applied = Set(try applied(db))
        for migration in Schema.migrations where !applied.contains(migration.id) {
            try db.execute("PRAGMA foreign_keys = OFF")
            defer { try? db.execute("PRAGMA foreign_keys = ON") }
            try db.inTransaction("BEGIN IMMEDIATE") {
                guard try db.fetchAll("SELECT 1 FROM \(table) WHERE identifier = ?", [.text(migration.id)]).isEmpty else { return }
                for change in migration.changes { try db.execute(Schema.sql(change, .sqlite)) }
                try db.run("INSERT INTO \(table) (identifier) VALUES (?)", [.text(migration.id)])
                guard try db.fetchAll("PRAGMA foreign_key_check", []).isEmpty else {
                    throw SQLiteError(extendedCode: SQLITE_CONSTRAINT | 3 << 8,  // SQLITE_CONSTRAINT_FOREIGNKEY
                         message: "FOREIGN KEY constraint failed", sql: "PRAGMA foreign_key_check")
                }
            }
        }
    }
}
