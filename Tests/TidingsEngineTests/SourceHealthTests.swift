import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// ``SourceHealth``: the one derivation `sources`, `status`, the status page and line, the
/// `tidings_source_up` gauge and the scheduler share.
final class SourceHealthTests: XCTestCase {
    func source(enabled: Bool = true) -> SourceConfig {
        var settings = SourceSettings()
        settings.enabled = enabled
        return SourceConfig(
            name: "s", provider: "scripted", settings: settings, flapWindow: 0, instance: ScriptedProvider(),
            file: "t", line: nil, configHash: "h1")
    }

    func testEachHealthFromWhatTheStateStores() {
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        func health(_ failures: Int, _ lastSuccess: Date?, _ hash: String?, enabled: Bool = true) -> SourceHealth {
            SourceHealth(source(enabled: enabled), StoredHealth(failures: failures, lastSuccess: lastSuccess, authFailedHash: hash))
        }
        XCTAssertEqual(SourceHealth(source(), nil), .new, "never polled")
        XCTAssertEqual(health(0, nil, nil), .new)
        XCTAssertEqual(health(0, t, nil), .ok)
        XCTAssertEqual(health(2, t, nil), .failing)
        XCTAssertEqual(health(1, t, "h1"), .authFailed)
        XCTAssertEqual(health(1, t, "h0"), .failing, "rejected under another configuration: tried again, failing until it succeeds")
        XCTAssertEqual(health(1, t, "h1", enabled: false), .paused, "disabled first")
        XCTAssertEqual(
            SourceHealth(source(enabled: false), StoredHealth(failures: 1, lastSuccess: t, authFailedHash: "h1"), polling: true), .authFailed,
            "a poll of a disabled source (check) still waits for a config change")
        XCTAssertEqual(SourceHealth.allCases.filter(\.isFailing), [.failing, .authFailed])
        XCTAssertEqual(SourceHealth.allCases.map(\.rawValue), ["ok", "new", "failing", "auth-failed", "paused"])
    }

    /// The daemon's status pass reads only the rows under which a source can be failing (issue 33:
    /// not every stored source every 5 s); every source read so counts as it did in the full read.
    func testTheStatusPassReadsOnlyTheRowsThatCanFail() throws {
        let store = try makeTestStore()
        let t = 1_800_000_000.0
        try store.database.write { db in
            for (name, failures, hash) in [("ok", 0, nil), ("never", 0, nil), ("failing", 3, nil), ("rejected", 1, "h1"), ("rejected-once", 0, "h0")] as [(String, Int, String?)] {
                _ = try db.execute(
                    "INSERT INTO source_state(source, provider, failures, last_success, auth_failed_hash) VALUES (?, 'scripted', ?, ?, ?)",
                    name, failures, name == "never" ? nil : t, hash)
            }
        }
        let all = try store.database.read { try StateStore.storedHealth($0) }
        let problems = try store.database.read { try StateStore.storedHealth($0, problemsOnly: true) }
        XCTAssertEqual(Set(all.keys), ["ok", "never", "failing", "rejected", "rejected-once"])
        XCTAssertEqual(Set(problems.keys), ["failing", "rejected", "rejected-once"])
        for (name, stored) in all {
            var s = source()
            s.configHash = "h0"
            XCTAssertEqual(SourceHealth(s, stored).isFailing, SourceHealth(s, problems[name]).isFailing, name)
            s.configHash = "h1"
            XCTAssertEqual(SourceHealth(s, stored).isFailing, SourceHealth(s, problems[name]).isFailing, name)
            if problems[name] != nil { XCTAssertEqual(problems[name], stored) }
        }
    }

    /// The health gauges at a daemon's start read the rows a page at a time (issue 33): the pages
    /// together are every row once, whatever the page's size.
    func testTheStoredHealthReadAPageAtATimeIsEveryRowOnce() throws {
        let store = try makeTestStore()
        try store.database.write { db in
            for i in 0..<7 {
                _ = try db.execute(
                    "INSERT INTO source_state(source, provider, failures, last_success) VALUES (?, 'scripted', ?, ?)", "s\(i)", i, 1_800_000_000.0 + Double(i))
            }
        }
        let all = try store.database.read { try StateStore.storedHealth($0) }
        XCTAssertEqual(all.count, 7)
        for size in [1, 2, 3, 7, 8] {
            var seen: [(String, StoredHealth)] = []
            var after: String? = nil
            while true {
                let page = try store.database.read { try StateStore.storedHealth($0, after: after, limit: size) }
                XCTAssertLessThanOrEqual(page.count, size)
                seen += page
                guard page.count == size, let last = page.last else { break }
                after = last.0
            }
            XCTAssertEqual(seen.map(\.0), all.keys.sorted(), "pages of \(size)")
            for (name, h) in seen { XCTAssertEqual(h, all[name], name) }
        }
    }
}
