import FoundationEssentials
import TidingsEngine
import TidingsPluginAPI

/// ``Schema`` in PostgreSQL's words, and its migrations, recorded in `schema_migrations`.
///
/// The first migration creates at once what the SQLite store reaches after v6-leases: the same
/// tables, columns in the same order, indexes, UNIQUE and FOREIGN KEY. Every later entry of
/// ``Schema/migrations`` is one more PostgreSQL migration, derived, never written here.
package enum PostgresSchema {
    /// Held (transaction-scoped) while migrating, so daemons starting together take turns.
    static let advisoryLock: Int64 = 0x7469_6469_6E67_7301  // "tidings" + 1

    /// The migrations, derived from ``Schema/migrations``: the first creates at once what
    /// SQLite reaches after ``firstThrough``, and each later SQLite migration is one of its own,
    /// `pgN-as-sqlite-ID`.
    package static let migrations: [(id: String, statements: [String])] = {
        let all = Schema.migrations
        guard let cut = all.firstIndex(where: { $0.id == firstThrough }) else { preconditionFailure("no migration \(firstThrough)") }
        var out = [(id: "pg1-as-sqlite-\(firstThrough)", statements: Schema.fold(all[...cut]).map { Schema.sql($0, .postgres) })]
        for m in all[(cut + 1)...] {
            out.append((id: "pg\(out.count + 1)-as-sqlite-\(m.id)", statements: m.changes.map { Schema.sql($0, .postgres) }))
        }
        return out
    }()

    /// The SQLite migration the first PostgreSQL one (shipped with PostgreSQL support) stands for.
    static let firstThrough = "v6-leases"

    /// Applies the migrations not yet recorded, in one transaction under an advisory lock.
    static func migrate(_ db: PostgresStateDatabase) throws {
        try db.write { sql in
            _ = try sql.fetchAll("SELECT pg_advisory_xact_lock(?)", [.integer(advisoryLock)])
            try sql.execute("CREATE TABLE IF NOT EXISTS schema_migrations(id TEXT PRIMARY KEY, applied_at DOUBLE PRECISION)", [])
            let applied = Set(try sql.fetchAll("SELECT id FROM schema_migrations", []).map { try $0[0] as String })
            let known = Set(migrations.map(\.id))
            let unknown = applied.subtracting(known)
            guard unknown.isEmpty else {
                var error = StateStore.NewerSchemaError(path: "PostgreSQL state \(db.location)", unknown: unknown.sorted())
                error.remedy = "Run that version, or point [state] url at another database."
                throw error
            }
            for migration in migrations where !applied.contains(migration.id) {
                for statement in migration.statements { try sql.execute(statement, []) }
                try sql.execute(
                    "INSERT INTO schema_migrations(id, applied_at) VALUES (?, ?)",
                    [.text(migration.id), .real(Date().timeIntervalSince1970)])
                db.logger.info("PostgreSQL state \(db.location): applied schema migration \(migration.id)")
            }
        }
    }
}
