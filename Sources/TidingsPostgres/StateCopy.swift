import FoundationEssentials
import TidingsEngine
import TidingsPluginAPI

/// `tidings state migrate`: copies a state (the SQLite file) into another database (PostgreSQL),
/// entirely through the seam: rows are read with one ``SQLConnection`` and written with the
/// other. The columns are the destination's (the schemas match, ``PostgresSchema``); rows
/// already there (same primary key) are left alone, so a second run copies nothing.
/// Event `seq` and delivery `id` are kept, and the destination's identity sequences moved past them.
package enum StateCopy {
    /// The tables copied, parents first (delivery refers to event). Not `instance` and
    /// `lease`: they describe running daemons, which a copy has none of.
    package static let tables = ["source_state", "item", "event", "delivery", "notice", "silence", "reminder"]
    /// Identity columns whose sequences must pass the copied values.
    static let identities = [("event", "seq"), ("delivery", "id")]
    /// Rows read (and inserted) per statement.
    static let batchRows = 500

    package struct TableCount: Sendable, Equatable, CustomStringConvertible {
        package var table: String
        package var copied: Int
        package var alreadyThere: Int
        package var description: String { "\(table): \(copied) copied, \(alreadyThere) already there" }
    }

    /// One transaction on each side: a snapshot read of `source`, one write to `destination`
    /// (nothing of it is kept if any row fails).
    package static func copy(from source: any StateDatabase, to destination: any StateDatabase) throws -> [TableCount] {
        try source.transaction(.read) { from in
            try destination.transaction(.write) { to in
                var counts: [TableCount] = []
                for table in tables {
                    counts.append(try copy(table, from: from, to: to))
                }
                for (table, column) in identities {
                    try advanceIdentity(table: table, column: column, on: to)
                }
                return counts
            }
        }
    }

    static func copy(_ table: String, from: any SQLConnection, to: any SQLConnection) throws -> TableCount {
        let columns = try columnNames(table, on: to)
        let key = try primaryKey(table, on: to)
        guard !columns.isEmpty, !key.isEmpty else {
            throw CopyError(description: "the destination has no table \(table) (or no primary key on it)")
        }
        let list = columns.joined(separator: ", ")
        let read = "SELECT \(list) FROM \(table) ORDER BY \(key.joined(separator: ", ")) LIMIT ? OFFSET ?"
        var count = TableCount(table: table, copied: 0, alreadyThere: 0)
        var offset = 0
        while true {
            let rows = try from.fetchAll(read, [.integer(Int64(batchRows)), .integer(Int64(offset))])
            if rows.isEmpty { break }
            let tuple = "(" + SQL.placeholders(columns.count) + ")"
            let insert =
                "INSERT INTO \(table) (\(list)) VALUES "
                + [String](repeating: tuple, count: rows.count).joined(separator: ", ")
                + " ON CONFLICT DO NOTHING"
            let inserted = try to.execute(insert, rows.flatMap(\.values))
            count.copied += inserted
            count.alreadyThere += rows.count - inserted
            offset += rows.count
            if rows.count < batchRows { break }
        }
        return count
    }

    /// The destination's columns of `table`, in order (PostgreSQL's catalog).
    static func columnNames(_ table: String, on to: any SQLConnection) throws -> [String] {
        try to.fetchAll(
            """
            SELECT column_name FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position
            """, [.text(table)]
        ).map { try $0[0] as String }
    }

    /// The columns of `table`'s primary key (a total order for paging through the source).
    static func primaryKey(_ table: String, on to: any SQLConnection) throws -> [String] {
        try to.fetchAll(
            """
            SELECT k.column_name FROM information_schema.table_constraints c
            JOIN information_schema.key_column_usage k
              ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema AND k.table_name = c.table_name
            WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() AND c.table_name = ?
            ORDER BY k.ordinal_position
            """, [.text(table)]
        ).map { try $0[0] as String }
    }

    /// Moves the identity sequence of `table.column` past the largest value in it, never back.
    static func advanceIdentity(table: String, column: String, on to: any SQLConnection) throws {
        guard let sequence: String = try to.scalar("SELECT pg_get_serial_sequence(?, ?)", [.text(table), .text(column)]),
            let largest: Int64 = try to.scalar("SELECT max(\(column)) FROM \(table)")
        else { return }
        let current: Int64 =
            try to.scalar(
                """
                SELECT last_value FROM pg_sequences WHERE quote_ident(schemaname) || '.' || quote_ident(sequencename) = ?
                """, [.text(sequence)]) ?? 0
        if largest > current {
            try to.execute("SELECT setval(?::regclass, ?)", [.text(sequence), .integer(largest)])
        }
    }

    package struct CopyError: Error, CustomStringConvertible {
        package var description: String
    }
}
