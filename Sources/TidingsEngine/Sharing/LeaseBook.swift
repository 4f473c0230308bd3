import FoundationEssentials
import Glibc
import TidingsPluginAPI

/// A running daemon, as the shared state knows it.
package struct Instance: Sendable, Equatable {
    /// New at each start (so a restarted daemon is a new instance).
    package var id: String
    package var host: String
    package var pid: Int32

    package static func current() -> Instance {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        return Instance(id: EventID.make(at: Date()), host: host, pid: getpid())
    }

    /// "HOST:PID", as `tidings sources` shows it.
    package var label: String { "\(host):\(pid)" }
}

/// A poll or delivery finished after its instance lost the lease: another instance owns it
/// now, so nothing is recorded (DESIGN §11: no event is created twice).
package struct LeaseLost: Error, CustomStringConvertible {
    package var name: String
    package var description: String { "the lease on \(name) passed to another instance; this poll is not recorded (the new owner polls it)" }
}

/// What one lease round asks for: every lease this instance could hold, with its length.
package struct LeaseWants: Sendable, Equatable {
    /// Lease name (``LeaseBook/sourceLease(_:)``, ``LeaseBook/sinkLease(_:)``) → length, seconds.
    package var sources = LeaseLengths()
    package var sinks = LeaseLengths()
    package init(sources: LeaseLengths = LeaseLengths(), sinks: LeaseLengths = LeaseLengths()) {
        self.sources = sources
        self.sinks = sinks
    }
}

/// Lease name → length, seconds: two arrays sorted by name, looked up by binary search. A
/// dictionary of 100,000 source leases was 6.3 MB in every daemon sharing them (issue 33);
/// these are 2.4 MB. Built at once from a list (``init(_:)``); a name set one at a time is
/// inserted in place (tests, sinks).
package struct LeaseLengths: Sendable, Equatable {
    /// In name order, without repeats.
    package private(set) var keys: [String] = []
    package private(set) var values: [TimeInterval] = []

    package init() {}

    /// `pairs` in any order; the last length given for a name counts.
    package init(_ pairs: [(name: String, length: TimeInterval)]) {
        let order = pairs.indices.sorted { a, b in pairs[a].name < pairs[b].name || (pairs[a].name == pairs[b].name && a < b) }
        keys.reserveCapacity(pairs.count)
        values.reserveCapacity(pairs.count)
        for i in order {
            if keys.last == pairs[i].name {
                values[values.count - 1] = pairs[i].length
            } else {
                keys.append(pairs[i].name)
                values.append(pairs[i].length)
            }
        }
    }

    package var count: Int { keys.count }
    package var isEmpty: Bool { keys.isEmpty }

    package subscript(name: String) -> TimeInterval? {
        get {
            let i = position(name)
            return i < keys.count && keys[i] == name ? values[i] : nil
        }
        set {
            let i = position(name)
            let present = i < keys.count && keys[i] == name
            switch (newValue, present) {
            case (let length?, true): values[i] = length
            case (let length?, false):
                keys.insert(name, at: i)
                values.insert(length, at: i)
            case (nil, true):
                keys.remove(at: i)
                values.remove(at: i)
            case (nil, false): break
            }
        }
    }

    /// The first position whose name is not before `name`.
    private func position(_ name: String) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] < name { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// The lease rows a round knows to exist (it creates the others): the names it created, until
/// it has created every lease of one ``LeaseWants``; then only that (not a set of 100,000
/// names, 4.2 MB, kept for good; issue 33).
package struct KnownLeases: Sendable {
    private var names = Set<String>()
    /// Every lease of these wants exists.
    private var all: LeaseWants?

    package init() {}

    /// The leases of `wants` not known to exist, in name order.
    func missing(_ wants: LeaseWants) -> [String] {
        if all == wants { return [] }
        return (wants.sources.keys + wants.sinks.keys).filter { !names.contains($0) }.sorted()
    }

    mutating func created(_ chunk: some Sequence<String>) { names.formUnion(chunk) }

    /// Every lease of `wants` exists now.
    mutating func createdAll(_ wants: LeaseWants) {
        all = wants
        names = []
    }
}

/// Leases on sources and sinks where several daemons share one state (DESIGN §11): the SQL.
///
/// Each instance runs a round every few seconds (``LeaseKeeper``), in one transaction:
/// 1. its heartbeat (`instance.seen_at`);
/// 2. it renews every lease it holds, by the lease's own length (one statement for all of them);
/// 3. leases whose owner stopped renewing them (expired) are taken up to a fair share,
///    ⌈wanted / live instances⌉ (a dead instance stops counting as live before its leases
///    expire, so the survivors' shares cover its sources); any left expired for a round are
///    taken by whoever comes next, share or not: nobody polls those sources now;
/// 4. free leases (new ones, or released on a clean stop or to rebalance) are taken only up
///    to the fair share, so a newcomer gets its share;
/// 5. an instance holding more than its fair share releases the rest (they become free).
/// Candidates are locked with `FOR UPDATE SKIP LOCKED`: two instances in their rounds at once
/// never take the same lease, and neither waits for the other.
package enum LeaseBook {
    package static func sourceLease(_ source: String) -> String { "source:" + source }
    package static func sinkLease(_ sink: String) -> String { "sink:" + sink }

    /// Where the poll's transaction records: only while `owner` holds the lease (locked until
    /// the transaction ends, so a round of another instance cannot take it meanwhile).
    static func check(_ db: any SQLConnection, name: String, owner: String, now: Date = Date()) throws {
        guard let r = try db.fetchOne("SELECT owner, expires_at FROM lease WHERE name = ?" + db.dialect.forUpdate, name) else {
            throw LeaseLost(name: name)
        }
        let holder: String? = try r[0]
        let expires: Double = try r[1]
        guard holder == owner, expires > now.timeIntervalSince1970 else { throw LeaseLost(name: name) }
    }

    /// The outcome of a round: the leases this instance holds now.
    package struct Held: Sendable, Equatable {
        package var sources: Set<String> = []
        package var sinks: Set<String> = []
        /// Instances seen alive in this round (this one included).
        package var live = 1
    }

    /// One round (see the type's description). `liveWindow`: an instance whose heartbeat is
    /// older is not counted for the fair share. `known`: lease names already created (the
    /// round inserts the others and adds them).
    /// `grace`: how long an expired lease is left to instances under their share before any
    /// instance takes it (a round).
    package static func round(
        _ db: any SQLConnection, instance: Instance, wants: LeaseWants, liveWindow: TimeInterval, grace: TimeInterval,
        now: Date, known: inout KnownLeases
    ) throws -> Held {
        let t = now.timeIntervalSince1970
        try db.execute(
            """
            INSERT INTO instance(id, host, pid, started_at, seen_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET seen_at = excluded.seen_at, stopped_at = NULL
            """, instance.id, instance.host, Int(instance.pid), t, t)
        let live = max(1, try db.scalar("SELECT count(*) FROM instance WHERE stopped_at IS NULL AND seen_at > ?", [(t - liveWindow).sqlValue]) ?? 1)
        // New leases: created free. In one order everywhere: instances starting together insert
        // the same names, and two inserting them in different orders deadlock (each waits for
        // the other's uncommitted rows; seen with 30,000 sources and three instances).
        for chunk in SQL.chunks(known.missing(wants)) {
            try db.execute(
                "INSERT INTO lease(name) VALUES \(Array(repeating: "(?)", count: chunk.count).joined(separator: ", ")) ON CONFLICT(name) DO NOTHING",
                chunk.map(\.sqlValue))
            known.created(chunk)
        }
        known.createdAll(wants)
        let renewed = try renew(db, instance: instance, now: t)
        var held = Held(live: live)
        held.sources = try share(
            db, prefix: "source:", held: renewed.filter { $0.hasPrefix("source:") }, wants: wants.sources, instance: instance, live: live,
            grace: grace, now: t)
        held.sinks = try share(
            db, prefix: "sink:", held: renewed.filter { $0.hasPrefix("sink:") }, wants: wants.sinks, instance: instance, live: live,
            grace: grace, now: t)
        return held
    }

    /// Step 2: renews every lease `instance` holds, sources and sinks, each by its own length,
    /// in one statement (one round trip however many it holds); returns their names. Only rows
    /// it still owns: a lease another instance took meanwhile is neither extended nor returned
    /// (and the poll's transaction checks the owner anyway, ``check(_:name:owner:now:)``).
    package static func renew(_ db: any SQLConnection, instance: Instance, now t: Double) throws -> Set<String> {
        // The rows are locked in the order of their names' bytes, the order in which a group
        // commit's batch of polls locks them (``GroupCommit``): waiting for each other, the two
        // never deadlock.
        let byName = db.dialect == .postgres ? "ORDER BY name COLLATE \"C\"" : "ORDER BY name"
        return Set(
            try db.fetchAll(
                """
                UPDATE lease SET expires_at = ? + length WHERE name IN (
                  SELECT name FROM lease WHERE owner = ? \(byName)\(db.dialect.forUpdate)
                ) RETURNING name
                """,
                t, instance.id
            ).map { try $0[0] as String })
    }

    /// Steps 3–5 for one kind of lease, from `held`: the leases of that kind just renewed.
    private static func share(
        _ db: any SQLConnection, prefix: String, held: Set<String>, wants: LeaseLengths, instance: Instance, live: Int,
        grace: TimeInterval, now t: Double
    ) throws -> Set<String> {
        // Drop what this instance no longer wants (a reload removed it).
        var mine = held
        let unwanted = mine.filter { wants[$0] == nil }
        if !unwanted.isEmpty {
            try release(db, names: Array(unwanted))
            mine.subtract(unwanted)
        }
        let fair = (wants.count + live - 1) / live
        if mine.count > fair {
            // Keep the first `fair` by name: each instance releases a stable set.
            let excess = Array(mine.sorted().dropFirst(fair))
            try release(db, names: excess)
            mine.subtract(excess)
        }
        // Expired leases (their owner died or hung) up to the share: the survivors split them
        // without taking too many and giving them back. Those expired for longer than `grace`
        // (a round: nobody with room took them) all of them. Then free ones up to the share.
        let expired = try candidates(db, prefix: prefix, condition: "owner IS NOT NULL AND expires_at < ?", t, limit: wants.count)
            .filter { wants[$0.name] != nil }
        let overdue = expired.filter { $0.expires < t - grace }.map(\.name)
        var room = max(0, fair - mine.count - overdue.count)
        let recent = expired.filter { $0.expires >= t - grace }.prefix(room).map(\.name)
        room -= recent.count
        let free =
            room == 0
            ? []
            : try candidates(db, prefix: prefix, condition: "owner IS NULL", limit: room + 64)
                .filter { wants[$0.name] != nil }.prefix(room).map(\.name)
        let taking = overdue + recent + free
        // One UPDATE per distinct length (a few: one per interval in use).
        for (length, names) in Dictionary(grouping: taking, by: { wants[$0]! }) {
            for chunk in SQL.chunks(names) {
                try db.execute(
                    "UPDATE lease SET owner = ?, expires_at = ?, length = ?, taken_at = ? WHERE name IN (\(SQL.placeholders(chunk.count)))",
                    [instance.id.sqlValue, (t + length).sqlValue, length.sqlValue, t.sqlValue] + chunk.map(\.sqlValue))
            }
        }
        mine.formUnion(taking)
        return mine
    }

    private static func candidates(
        _ db: any SQLConnection, prefix: String, condition: String, _ arguments: any SQLConvertible...,
        limit: Int
    ) throws -> [(name: String, expires: Double)] {
        guard limit > 0 else { return [] }
        return try db.fetchAll(
            "SELECT name, expires_at FROM lease WHERE substr(name, 1, length(?)) = ? AND \(condition) ORDER BY name LIMIT \(limit)"
                + db.dialect.forUpdateSkipLocked,
            [prefix.sqlValue, prefix.sqlValue] + arguments.map(\.sqlValue)
        ).map { (try $0[0] as String, try $0[1] as Double) }
    }

    private static func release(_ db: any SQLConnection, names: [String]) throws {
        for chunk in SQL.chunks(names) {
            try db.execute(
                "UPDATE lease SET owner = NULL, expires_at = 0 WHERE name IN (\(SQL.placeholders(chunk.count)))",
                chunk.map(\.sqlValue))
        }
    }

    /// A clean stop: every lease of `instance` is free at once, and it no longer counts as live.
    package static func releaseAll(_ db: any SQLConnection, instance: Instance, now: Date) throws {
        try db.execute("UPDATE lease SET owner = NULL, expires_at = 0 WHERE owner = ?", instance.id)
        try db.execute("UPDATE instance SET stopped_at = ? WHERE id = ?", now, instance.id)
    }

    /// Source name → the instance ("HOST:PID") holding its lease now.
    static func sourceOwners(_ db: any SQLConnection, now: Date) throws -> [String: String] {
        var out: [String: String] = [:]
        for r in try db.fetchAll(
            """
            SELECT l.name, i.host, i.pid FROM lease l JOIN instance i ON i.id = l.owner
            WHERE l.expires_at > ? AND substr(l.name, 1, 7) = 'source:'
            """, now)
        {
            let name: String = try r[0]
            out[String(name.dropFirst(7))] = "\(try r[1] as String):\(try r[2] as Int)"
        }
        return out
    }

    /// A daemon sharing the state as `tidings status` shows it: who, since when, how many
    /// source and sink leases it holds now.
    package struct LiveInstance: Sendable, Equatable {
        /// "HOST:PID".
        package var label: String
        package var startedAt: Date
        /// Its last lease round.
        package var seenAt: Date
        package var sources: Int
        package var sinks: Int
    }

    /// The instances that renewed their leases within `window`, with the leases they hold
    /// (one query, whatever the number of sources).
    package static func liveInstanceLeases(_ db: any SQLConnection, within window: TimeInterval, now: Date) throws -> [LiveInstance] {
        try db.fetchAll(
            """
            SELECT i.host, i.pid, i.started_at, i.seen_at,
              (SELECT count(*) FROM lease l WHERE l.owner = i.id AND l.expires_at > ? AND substr(l.name, 1, 7) = 'source:'),
              (SELECT count(*) FROM lease l WHERE l.owner = i.id AND l.expires_at > ? AND substr(l.name, 1, 5) = 'sink:')
            FROM instance i WHERE i.stopped_at IS NULL AND i.seen_at > ? ORDER BY i.host, i.pid
            """, now, now, now.addingTimeInterval(-window)
        ).map { r -> LiveInstance in
            LiveInstance(
                label: "\(try r[0] as String):\(try r[1] as Int)", startedAt: try r[2], seenAt: try r[3],
                sources: try r[4], sinks: try r[5])
        }
    }

    /// Whether an instance other than `except` renewed its leases within `window` (the
    /// daemons that deliver what `tidings check` queues).
    package static func liveInstances(_ db: any SQLConnection, within window: TimeInterval, now: Date) throws -> [String] {
        try db.fetchAll("SELECT host, pid FROM instance WHERE stopped_at IS NULL AND seen_at > ? ORDER BY host, pid", now.addingTimeInterval(-window))
            .map { "\(try $0[0] as String):\(try $0[1] as Int)" }
    }
}
