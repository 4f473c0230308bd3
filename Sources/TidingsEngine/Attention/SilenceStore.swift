import FoundationEssentials
import TidingsPluginAPI

/// Silences in the state's `silence` table (migration v4-attention). The CLI and the desktop
/// sink write here directly, also while a daemon runs: the daemon reads the active silences in
/// each poll's transaction (``active(_:at:)``), so nothing has to tell it.
package enum SilenceStore {
    /// Makes a silence from `now` until `end`; returns it (with its new id).
    @discardableResult
    package static func add(
        _ store: StateStore, matchers: [SilenceMatcher], comment: String, createdBy: String, now: Date = Date(), until end: Date
    ) throws -> Silence {
        try store.database.write { db in
            var silence = Silence(id: "", matchers: matchers, comment: comment, createdBy: createdBy, createdAt: now, startsAt: now, endsAt: end)
            repeat {
                silence.id = SilenceID.make()
            } while try db.fetchOne("SELECT 1 FROM silence WHERE id = ?", silence.id) != nil
            try db.execute(
                "INSERT INTO silence(id, matchers, comment, created_by, created_at, starts_at, ends_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                silence.id, JSONValue.array(matchers.map(\.json)).jsonString(), comment, createdBy, now, now, end)
            return silence
        }
    }

    /// Every stored silence, oldest first (``Silence/state(at:)`` tells the ended ones).
    package static func all(_ store: StateStore) throws -> [Silence] {
        try store.database.read { db in try fetch(db, endingAfter: nil) }
    }

    /// The silences active at `now`, read inside a poll's transaction.
    static func active(_ db: any SQLConnection, at now: Date) throws -> [Silence] {
        try fetch(db, endingAfter: now).filter { $0.state(at: now) == .active }
    }

    /// Counts one more event kept from its sinks by silence `id` (inside the poll's transaction).
    static func countSilenced(_ db: any SQLConnection, id: String) throws {
        try db.execute("UPDATE silence SET silenced = silenced + 1 WHERE id = ?", id)
    }

    /// A stored silence whose matchers cannot be read back (edited by hand, or written by a
    /// newer version) is left out: applying it with fewer matchers would silence too much.
    private static func fetch(_ db: any SQLConnection, endingAfter now: Date?) throws -> [Silence] {
        var sql = "SELECT id, matchers, comment, created_by, created_at, starts_at, ends_at, silenced FROM silence"
        var arguments: [SQLValue] = []
        if let now {
            sql += " WHERE ends_at > ?"
            arguments = [now.sqlValue]
        }
        sql += " ORDER BY created_at, id"
        return try db.fetchAll(sql, arguments).compactMap { r -> Silence? in
            guard let matchers = try? Self.matchers(json: try r[1]) else { return nil }
            return Silence(
                id: try r[0], matchers: matchers, comment: try r[2], createdBy: try r[3], createdAt: try r[4],
                startsAt: try r[5], endsAt: try r[6], silenced: try r[7])
        }
    }

    private static func matchers(json text: String) throws -> [SilenceMatcher] {
        guard let array = try JSONParser.parse(text).arrayValue, !array.isEmpty else {
            throw SilenceMatcher.ParseError(description: "no matchers")
        }
        return try array.map { json throws(SilenceMatcher.ParseError) in try SilenceMatcher(json: json) }
    }

    /// Why `silence expire ID` did nothing.
    package enum ExpireError: Error, CustomStringConvertible, Equatable {
        case notFound(String)
        /// Several silences have this prefix (the candidates).
        case ambiguous(String, [Silence])
        case tooShort(String)
        /// It had already ended.
        case alreadyExpired(Silence)

        package var description: String {
            switch self {
            case .notFound(let id): return "no silence with id \(id) (see `tidings silence list --expired`)"
            case .ambiguous(let id, let c): return "\(c.count) silences match \(id); give more of the id:"
            case .tooShort(let id): return "silence id \(id) is too short: give at least \(SilenceID.minimumPrefix) characters"
            case .alreadyExpired(let s): return "silence \(s.id) already ended at \(Timestamp.format(s.endsAt))"
            }
        }

        package var candidates: [Silence] {
            if case .ambiguous(_, let c) = self { return c }
            return []
        }
    }

    /// Ends a silence now, by id or a unique prefix of it (any case). Returns it as it is now.
    @discardableResult
    package static func expire(_ store: StateStore, id: String, now: Date = Date()) throws -> Silence {
        try store.database.write { db in
            let all = try fetch(db, endingAfter: nil)
            var chosen: Silence
            switch IDPrefix.resolve(id, among: all.map(\.id), minimum: SilenceID.minimumPrefix) {
            case .one(let full): chosen = all.first { $0.id == full }!
            case .none: throw ExpireError.notFound(id)
            case .ambiguous(let ids): throw ExpireError.ambiguous(id, all.filter { ids.contains($0.id) })
            case .tooShort: throw ExpireError.tooShort(id)
            }
            guard chosen.state(at: now) != .expired else { throw ExpireError.alreadyExpired(chosen) }
            chosen.endsAt = now
            try db.execute("UPDATE silence SET ends_at = ? WHERE id = ?", now, chosen.id)
            return chosen
        }
    }
}
