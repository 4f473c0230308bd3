import TidingsPluginAPI

/// The state's schema, described once (DESIGN §11): every table, column and index, and the
/// migrations that reach them, in the order they shipped. The backends derive their own
/// migrations from it: TidingsSQLite one GRDB migration per entry (ids `v1` … `v7-…`), and
/// TidingsPostgres the same changes folded into fewer steps (`pg1-as-sqlite-v6-leases` creates
/// what SQLite reaches after v6). A shipped migration is never edited: a change is a new entry
/// at the end, which both backends then apply.
///
/// Values are the four of ``SQLValue``: text, integer (a Bool as 0/1), real (a time as seconds
/// since 1970) and NULL.
package enum Schema {
    package enum ColumnType: Sendable, Equatable {
        case text
        case integer
        case real
    }

    package struct Column: Sendable, Equatable {
        package var name: String
        package var type: ColumnType
        package var notNull = false
        /// The SQL default, as written (`0`, `''`).
        package var defaultValue: String?
        /// A key the database numbers (SQLite `INTEGER PRIMARY KEY AUTOINCREMENT`, PostgreSQL an identity column).
        package var generatedKey = false
        package var primaryKey = false
        package var unique = false
        /// `table(column)`; rows go with the row they refer to (ON DELETE CASCADE).
        package var references: String?

        package init(
            _ name: String, _ type: ColumnType, notNull: Bool = false, defaultValue: String? = nil,
            generatedKey: Bool = false, primaryKey: Bool = false, unique: Bool = false, references: String? = nil
        ) {
            self.name = name
            self.type = type
            self.notNull = notNull
            self.defaultValue = defaultValue
            self.generatedKey = generatedKey
            self.primaryKey = primaryKey
            self.unique = unique
            self.references = references
        }
    }

    package struct Table: Sendable, Equatable {
        package var name: String
        package var columns: [Column]
        /// A key of several columns (one column's key is ``Column/primaryKey``).
        package var primaryKey: [String] = []
        /// SQLite only: the rows are stored in key order, without a rowid.
        package var withoutRowID = false
    }

    package struct Index: Sendable, Equatable {
        package var name: String
        package var table: String
        package var columns: [String]
    }

    package enum Change: Sendable, Equatable {
        case createTable(Table)
        case addColumn(table: String, Column)
        case createIndex(Index)
    }

    package struct Migration: Sendable {
        /// The id SQLite records (GRDB's `grdb_migrations`).
        package var id: String
        package var changes: [Change]
    }

    // Shorthands for the table below.
    private static func text(_ n: String, notNull: Bool = true, defaultValue: String? = nil) -> Column {
        Column(n, .text, notNull: notNull, defaultValue: defaultValue)
    }
    private static func integer(_ n: String, notNull: Bool = true, defaultValue: String? = nil) -> Column {
        Column(n, .integer, notNull: notNull, defaultValue: defaultValue)
    }
    private static func real(_ n: String, notNull: Bool = true, defaultValue: String? = nil) -> Column {
        Column(n, .real, notNull: notNull, defaultValue: defaultValue)
    }
    private static func optionalText(_ n: String) -> Column { text(n, notNull: false) }
    private static func optionalReal(_ n: String) -> Column { real(n, notNull: false) }

    /// Every migration, oldest first.
    package static let migrations: [Migration] = [
        Migration(
            id: "v1",
            changes: [
                .createTable(
                    Table(
                        name: "source_state",
                        columns: [
                            Column("source", .text, primaryKey: true),
                            text("provider"),
                            optionalText("etag"),
                            optionalText("last_modified"),
                            optionalReal("baseline_at"),
                            optionalReal("last_poll"),
                            optionalReal("last_success"),
                            optionalText("last_error"),
                            optionalReal("last_error_at"),
                            integer("failures", defaultValue: "0"),
                            integer("error_reported", defaultValue: "0"),
                            optionalText("auth_failed_hash"),
                            optionalReal("next_due"),
                        ])),
                .createTable(
                    Table(
                        name: "item",
                        columns: [
                            text("source"),
                            text("key"),
                            text("kind"),
                            text("fingerprint"),
                            text("state"),  // StoredItem.State: present, gone
                            real("first_seen"),
                            real("changed_at"),
                            optionalReal("missing_since"),
                            text("snapshot"),
                        ], primaryKey: ["source", "key"], withoutRowID: true)),
                .createTable(
                    Table(
                        name: "event",
                        columns: [
                            Column("seq", .integer, generatedKey: true),
                            Column("id", .text, notNull: true, unique: true),
                            text("source"),
                            text("kind"),
                            text("type"),
                            text("key"),
                            real("observed_at"),
                            text("payload"),
                        ])),
                .createIndex(Index(name: "event_by_source", table: "event", columns: ["source", "seq"])),
                .createIndex(Index(name: "event_by_time", table: "event", columns: ["observed_at"])),
                .createTable(
                    Table(
                        name: "delivery",
                        columns: [
                            Column("id", .integer, generatedKey: true),
                            Column("event_seq", .integer, notNull: true, references: "event(seq)"),
                            text("sink"),
                            text("batch"),
                            text("status"),  // DeliveryStatus
                            integer("attempts", defaultValue: "0"),
                            real("next_attempt"),
                            real("created_at"),
                            optionalText("last_error"),
                        ])),
                .createIndex(Index(name: "delivery_by_sink", table: "delivery", columns: ["sink", "status", "id"])),
            ]),
        Migration(
            id: "v2-notices",
            changes: [
                .createTable(
                    Table(
                        name: "notice",
                        columns: [
                            text("source"),
                            text("key"),
                            text("event_id"),
                            text("title"),
                            text("body"),
                            optionalText("url"),
                            text("severity"),
                            real("created_at"),
                            real("updated_at"),
                            real("expires_at"),
                            optionalReal("seen_at"),
                            optionalReal("dismissed_at"),
                            optionalReal("ended_at"),
                            optionalReal("redelivered_at"),
                        ], primaryKey: ["source", "key"])),
                .createIndex(Index(name: "notice_by_event", table: "notice", columns: ["event_id"])),
            ]),
        // The earliest time a server allowed the next poll (its Retry-After).
        Migration(id: "v3-schedule-not-before", changes: [.addColumn(table: "source_state", optionalReal("not_before"))]),
        // The hash of what an item shows, where it differs from its fingerprint (custom fingerprints).
        Migration(id: "v3-item-content-hash", changes: [.addColumn(table: "item", optionalText("content_hash"))]),
        // DESIGN §10: held and grouped deliveries (hold: 'quiet' or 'group'), silences, reminders.
        Migration(
            id: "v4-attention",
            changes: [
                .addColumn(table: "delivery", optionalReal("hold_until")),
                .addColumn(table: "delivery", optionalText("hold")),
                .addColumn(table: "event", optionalText("silenced_by")),
                .createTable(
                    Table(
                        name: "silence",
                        columns: [
                            Column("id", .text, primaryKey: true),
                            text("matchers"),  // JSON array of {"name","op","value"}
                            text("comment", defaultValue: "''"),
                            text("created_by"),
                            real("created_at"),
                            real("starts_at"),
                            real("ends_at"),
                            integer("silenced", defaultValue: "0"),  // events it kept from their sinks
                        ])),
                .createIndex(Index(name: "silence_by_end", table: "silence", columns: ["ends_at"])),
                .createTable(
                    Table(
                        name: "reminder",
                        columns: [
                            text("source"),
                            text("key"),
                            text("route"),
                            real("last_at"),
                        ], primaryKey: ["source", "key", "route"], withoutRowID: true)),
            ]),
        // Reminders sent for the item through the route since its last change.
        Migration(id: "v5-reminders", changes: [.addColumn(table: "reminder", integer("count", defaultValue: "0"))]),
        // Sharing one state between daemons (DESIGN §11).
        Migration(
            id: "v6-leases",
            changes: [
                .createTable(
                    Table(
                        name: "instance",
                        columns: [
                            Column("id", .text, primaryKey: true),
                            text("host"),
                            integer("pid"),
                            real("started_at"),
                            real("seen_at"),  // its last lease round (heartbeat)
                            optionalReal("stopped_at"),  // set when it stopped cleanly
                        ])),
                .createTable(
                    Table(
                        name: "lease",
                        columns: [
                            Column("name", .text, primaryKey: true),  // 'source:NAME' or 'sink:NAME'
                            optionalText("owner"),  // instance.id; NULL when released
                            real("expires_at", defaultValue: "0"),
                            real("length", defaultValue: "0"),  // seconds a renewal extends it by
                            optionalReal("taken_at"),
                        ])),
                .createIndex(Index(name: "lease_by_owner", table: "lease", columns: ["owner"])),
            ]),
        // The remote's own minimum time between polls (e.g. GitHub's X-Poll-Interval).
        Migration(id: "v7-schedule-min-interval", changes: [.addColumn(table: "source_state", optionalReal("min_interval"))]),
    ]

    /// One change as a statement of `dialect`: INTEGER is BIGINT on PostgreSQL, a real DOUBLE
    /// (SQLite) or DOUBLE PRECISION, a generated key AUTOINCREMENT or an identity column, and
    /// WITHOUT ROWID is SQLite's alone.
    package static func sql(_ change: Change, _ dialect: SQLDialect) -> String {
        switch change {
        case .createTable(let table):
            var parts = table.columns.map { column($0, dialect) }
            if !table.primaryKey.isEmpty { parts.append("PRIMARY KEY(\(table.primaryKey.joined(separator: ", ")))") }
            let rowid = table.withoutRowID && dialect == .sqlite ? " WITHOUT ROWID" : ""
            return "CREATE TABLE \(table.name)(\n  \(parts.joined(separator: ",\n  "))\n)\(rowid)"
        case .addColumn(let table, let c):
            return "ALTER TABLE \(table) ADD COLUMN \(column(c, dialect))"
        case .createIndex(let index):
            return "CREATE INDEX \(index.name) ON \(index.table)(\(index.columns.joined(separator: ", ")))"
        }
    }

    static func column(_ c: Column, _ dialect: SQLDialect) -> String {
        let postgres = dialect == .postgres
        var s =
            "\(c.name) "
            + {
                switch c.type {
                case .text: "TEXT"
                case .integer: postgres ? "BIGINT" : "INTEGER"
                case .real: postgres ? "DOUBLE PRECISION" : "DOUBLE"
                }
            }()
        if c.generatedKey { s += postgres ? " GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" : " PRIMARY KEY AUTOINCREMENT" }
        if c.primaryKey { s += " PRIMARY KEY" }
        if c.notNull { s += " NOT NULL" }
        if c.unique { s += " UNIQUE" }
        if let d = c.defaultValue { s += " DEFAULT \(d)" }
        if let r = c.references { s += " REFERENCES \(r) ON DELETE CASCADE" }
        return s
    }

    /// The tables as the last migration leaves them, in the order they were created, each with
    /// the indexes made on it (a backend that creates the schema at once creates it like this).
    package static func fold(_ migrations: ArraySlice<Migration>) -> [Change] {
        var order: [Change] = []
        for change in migrations.flatMap(\.changes) {
            switch change {
            case .createTable, .createIndex:
                order.append(change)
            case .addColumn(let table, let column):
                guard let i = order.firstIndex(where: { if case .createTable(let t) = $0 { t.name == table } else { false } }),
                    case .createTable(var t) = order[i]
                else {
                    order.append(change)  // a table an earlier step made: altered in place
                    continue
                }
                t.columns.append(column)
                order[i] = .createTable(t)
            }
        }
        return order
    }
}

/// The values of `delivery.status` (a delivered row is deleted, not kept).
package enum DeliveryStatus: String, Sendable, CaseIterable {
    /// Waiting for its sink, its retry or the end of its hold.
    case pending
    /// Given up on (a dead letter): `tidings outbox retry` requeues it.
    case dead

    /// The value as an SQL literal, for statements that compare with it.
    package var sql: String { "'\(rawValue)'" }
}

extension StoredItem.State {
    /// The value as an SQL literal (`item.state`), for statements that compare with it.
    package var sql: String { "'\(rawValue)'" }
}
