import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// A state file written before the schema was described once (``Schema``): by the release build
/// of main at 75138c9's schema (migrations v1 … v7), after two `tidings check` runs of an exec
/// source (items `a` and `b`, a `new` event for `b`, its delivery to a failing exec sink pending).
/// It must open unchanged and go on working, and a fresh file must get the very same tables.
final class OldStateFileTests: XCTestCase {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/state-made-before-rehoming.sqlite").path

    func copyOfFixture() throws -> String {
        let dir = try scratchDirectory()
        chmod(dir, 0o700)
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: "\(dir)/tidings.sqlite")
        chmod("\(dir)/tidings.sqlite", 0o600)
        return dir
    }

    /// Every table's columns (name, type, NOT NULL, default, key) and every index, as SQLite
    /// sees them (opened without migrating), in the state directory `dir`.
    func shape(_ dir: String) throws -> [String] {
        try SQLiteStateDatabase(path: "\(dir)/tidings.sqlite", busyTimeout: 1).read { db in
            var out: [String] = []
            let tables: [String] = try db.fetchAll(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%' ORDER BY name"
            ).map { try $0[0] }
            for t in tables {
                for r in try db.fetchAll("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?)", t) {
                    out.append("\(t).\(try r[0] as String) \(try r[1] as String) notnull=\(try r[2] as Int) default=\((try r[3] as String?) ?? "-") pk=\(try r[4] as Int)")
                }
                for r in try db.fetchAll("SELECT name, \"unique\" FROM pragma_index_list(?) ORDER BY name", t) {
                    let name: String = try r[0]
                    let columns: [String] = try db.fetchAll("SELECT name FROM pragma_index_info(?) ORDER BY seqno", name).map { try $0[0] }
                    out.append(
                        "\(t) index \(name.hasPrefix("sqlite_autoindex") ? "auto" : name) unique=\(try r[1] as Int) (\(columns.joined(separator: ",")))"
                    )
                }
                let sql: String = try db.scalar("SELECT sql FROM sqlite_master WHERE name = ?", [.text(t)]) ?? ""
                out.append(
                    "\(t) rowid=\(!sql.contains("WITHOUT ROWID")) autoincrement=\(sql.contains("AUTOINCREMENT")) cascade=\(sql.contains("ON DELETE CASCADE"))")
            }
            return out
        }
    }

    func testAFreshStateHasExactlyTheTablesOfTheOldFile() throws {
        let fresh = try scratchDirectory()
        _ = try StateStore.open(directory: fresh, logger: quietLogger)
        let old = try shape(try copyOfFixture())
        XCTAssertGreaterThan(old.count, 60)
        XCTAssertEqual(try shape(fresh), old)
    }

    func testTheOldFileOpensWithItsMigrationsAndGoesOnWorking() throws {
        let dir = try copyOfFixture()
        let store = try StateStore.open(directory: dir, logger: quietLogger)
        let applied: [String] = try store.database.read {
            try $0.fetchAll("SELECT identifier FROM grdb_migrations ORDER BY rowid").map { try $0[0] }
        }
        XCTAssertEqual(applied, Schema.migrations.map(\.id), "nothing re-run, nothing missing")
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM item WHERE source = 'news' AND state = 'present'"), 2)
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM delivery WHERE status = 'pending'"), 1)

        // The next poll of the source sees only what is new since the old build's poll.
        let provider = ScriptedProvider()
        provider.items = [("a", "first"), ("b", "second"), ("c", "third")].map { Item(key: $0.0, kind: "item", title: $0.1) }
        let source = SourceConfig(
            name: "news", provider: "exec", settings: SourceSettings(), flapWindow: 0, instance: provider,
            file: "test", line: nil, configHash: "h")
        let record = try PollRecorder(store: store).recordSuccess(
            source, result: .snapshot(provider.items), now: Date(), options: RecordOptions(router: Router(routes: [], allSinks: ["out"])))
        XCTAssertEqual(record.baselineCount, nil, "not a baseline: the old file's items count")
        XCTAssertEqual(record.events.map { "\($0.event.rawValue) \($0.key)" }, ["new c"], "a and b are as the old build stored them")
        XCTAssertEqual(try store.scalar("SELECT count(*) FROM delivery WHERE status = 'pending'"), 2)
    }
}
