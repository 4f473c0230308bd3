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
}
