import FoundationEssentials
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// A state file made by the last build on GRDB (1d13b3a, before TidingsSQLite went to SQLite's C
/// API): two `tidings check --deliver` runs of an exec source `news` (items `a`, a warning,
/// and `b`), a `new` event for `b` whose delivery to a failing exec sink is retrying, a
/// reminder of `a` through a route with `repeat_interval`, and a silence. The C API version
/// must read every row as GRDB wrote it (times are REAL seconds since 1970, read back to the
/// bit), recognise GRDB's migrations, and go on writing the file.
final class StateFileMadeByGRDBTests: XCTestCase {
    static let fixture = PathText.appending("Fixtures/state-made-by-grdb.sqlite", to: PathText.parent(#filePath))

    /// Every row of every table, as Python's sqlite3 read the fixture when it was added.
    static let rowsAsStored = [
            #"delivery: 2 | 1 | 'broken' | '01M8G67K7P7N2YCY07EQ50GDCC' | 'pending' | 1 | 1795839743.5305808 | 1795839741.1746683 | 'sh exited with status 5' | NULL | NULL"#,
            #"event: 1 | '01M8G67K7QZ706A13X9TN5D6GQ' | 'news' | 'item' | 'new' | 'b' | 1795839741.1746683 | '{"body":"","data":{"n":2},"event":"new","id":"01M8G67K7QZ706A13X9TN5D6GQ","key":"b","kind":"item","observed_at":"2026-11-28T04:22:21Z","provider":"exec","severity":"info","source":"news","title":"second ÆØÅ","url":"https://example.org/b"}' | NULL"#,
            #"event: 2 | '01M8G67K7Q45PCSPN7E4DWA5EW' | 'news' | 'item' | 'reminder' | 'a' | 1795839741.1746683 | '{"body":"Still present since 2026-11-28T04:22:19Z (for 1s; reminder 1).","data":{"reminder_count":1,"since":"2026-11-28T04:22:19Z"},"event":"reminder","id":"01M8G67K7Q45PCSPN7E4DWA5EW","key":"a","kind":"item","observed_at":"2026-11-28T04:22:21Z","provider":"exec","severity":"warning","source":"news","title":"first","url":null}' | NULL"#,
            #"grdb_migrations: 'v1'"#,
            #"grdb_migrations: 'v2-notices'"#,
            #"grdb_migrations: 'v3-item-content-hash'"#,
            #"grdb_migrations: 'v3-schedule-not-before'"#,
            #"grdb_migrations: 'v4-attention'"#,
            #"grdb_migrations: 'v5-reminders'"#,
            #"grdb_migrations: 'v6-leases'"#,
            #"grdb_migrations: 'v7-schedule-min-interval'"#,
            #"item: 'news' | 'a' | 'item' | '76ffde76db031555' | 'present' | 1795839739.8953257 | 1795839739.8953257 | NULL | '{"body":"","data":{},"kind":"item","severity":"warning","title":"first"}' | NULL"#,
            #"item: 'news' | 'b' | 'item' | 'aeb16e34b4fc3cf5' | 'present' | 1795839741.1746683 | 1795839741.1746683 | NULL | '{"body":"","data":{"n":2},"kind":"item","severity":"info","title":"second ÆØÅ","url":"https://example.org/b"}' | NULL"#,
            #"reminder: 'news' | 'a' | '54e90a17162bf0b7' | 1795839741.1746683 | 1"#,
            #"silence: 'n70cr24ypk' | '[{"name":"source","op":"=","value":"news"},{"name":"title","op":"~=","value":"(?i)third"}]' | 'made by the fixture' | 'root@vm' | 1795839741.2377145 | 1795839741.2377145 | 1795846941.2377145 | 0"#,
            #"source_state: 'news' | 'exec' | NULL | NULL | 1795839739.8953257 | 1795839741.1746683 | 1795839741.1746683 | NULL | NULL | 0 | 0 | NULL | 1795840019.1957507 | NULL | NULL"#,
            #"sqlite_sequence: 'delivery' | 3"#,
            #"sqlite_sequence: 'event' | 2"#,
    ]

    private func copyOfFixture() throws -> String {
        let dir = try scratchDirectory()
        chmod(dir, 0o700)
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: "\(dir)/tidings.sqlite")
        chmod("\(dir)/tidings.sqlite", 0o600)
        return dir
    }

    /// Every row of every table, each value as Python prints it: NULL, 2, 1795839741.1746683, 'text'.
    private static func rows(_ store: StateStore) throws -> [String] {
        try store.database.read { db in
            let tables: [String] = try db.fetchAll("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").map { try $0[0] }
            return try tables.flatMap { table in
                try db.fetchAll("SELECT * FROM \"\(table)\" ORDER BY 1").map { row in
                    "\(table): " + row.values.map(Self.shown).joined(separator: " | ")
                }
            }
        }
    }

    private static func shown(_ value: SQLValue) -> String {
        switch value {
        case .null: return "NULL"
        case .integer(let n): return "\(n)"
        case .real(let d): return "\(d)"
        case .text(let t): return "'\(t)'"
        }
    }

    func testEveryRowReadsBackAsGRDBStoredIt() throws {
        let store = try StateStore.open(directory: try copyOfFixture(), logger: quietLogger)
        XCTAssertEqual(try Self.rows(store), Self.rowsAsStored)
        // Times: the REAL GRDB bound is the Date the engine gave it, to the bit.
        let lastPoll: Date? = try store.database.read { try $0.scalar("SELECT last_poll FROM source_state WHERE source = 'news'") }
        XCTAssertEqual(lastPoll, Date(timeIntervalSince1970: 1795839741.1746683))
        XCTAssertEqual(lastPoll?.timeIntervalSince1970.bitPattern, (1795839741.1746683 as Double).bitPattern)
    }

    func testItsMigrationsAreRecognisedAndItGoesOnWorking() throws {
        let dir = try copyOfFixture()
        let store = try StateStore.open(directory: dir, logger: quietLogger)
        let applied: [String] = try store.database.read { try $0.fetchAll("SELECT identifier FROM grdb_migrations ORDER BY rowid").map { try $0[0] } }
        XCTAssertEqual(applied, Schema.migrations.map(\.id), "nothing re-run, nothing missing")

        // What the CLI reads: the outbox with its stored event, the silence.
        let outbox = try OutboxStore(store: store).entries(now: Date(timeIntervalSince1970: 1795839742))
        XCTAssertEqual(outbox.map(\.eventID), ["01M8G67K7QZ706A13X9TN5D6GQ"])
        XCTAssertEqual(outbox.first?.event?.title, "second ÆØÅ")
        XCTAssertEqual(try SilenceStore.all(store).map(\.comment), ["made by the fixture"])

        // The next poll sees only what is new since GRDB's poll, and its rows land.
        let provider = ScriptedProvider()
        provider.items = [
            Item(key: "a", kind: "item", title: "first", severity: .warning),
            Item(key: "b", kind: "item", title: "second ÆØÅ", url: "https://example.org/b", data: .object(["n": .number(2)])),
            Item(key: "c", kind: "item", title: "third"),
        ]
        let source = SourceConfig(
            name: "news", provider: "exec", settings: SourceSettings(), flapWindow: 0, instance: provider,
            file: "test", line: nil, configHash: "h")
        let record = try PollRecorder(store: store).recordSuccess(
            source, result: .snapshot(provider.items), now: Date(timeIntervalSince1970: 1795839800),
            options: RecordOptions(router: Router(routes: [], allSinks: ["broken"])))
        XCTAssertEqual(record.baselineCount, nil, "not a baseline: the old file's items count")
        let events = record.events.map { "\($0.event.rawValue) \($0.key)" }
        XCTAssertEqual(events, ["new c"], "a and b are as GRDB stored them (their fingerprints match)")
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM item WHERE source = 'news' AND state = 'present'"), 3)
        XCTAssertEqual(try store.scalar("SELECT max(seq) FROM event"), 2 + events.count, "AUTOINCREMENT goes on from GRDB's sqlite_sequence")

        // Another process opening it afterwards finds the new rows and no migration to run.
        let again = try StateStore(path: "\(dir)/tidings.sqlite")
        XCTAssertEqual(
            try again.scalar("SELECT silenced_by FROM event WHERE key = 'c'"), "n70cr24ypk", "GRDB's silence (title~=(?i)third) holds back c")
        XCTAssertEqual(try again.scalar("SELECT count(*) FROM delivery"), 1, "so only GRDB's retrying delivery is queued")
        XCTAssertEqual(try again.scalar("SELECT count(*) FROM grdb_migrations"), Schema.migrations.count)
    }
}
