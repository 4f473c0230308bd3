import Foundation
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class TimeoutTests: XCTestCase {
    func testFastBodyWinsAndItsTimerStopsWithIt() async throws {
        let fired = Atomic<Int>(0)
        let v = try await withTimeout(
            0.2,
            onTimeout: {
                fired.add(1, ordering: .relaxed)
                return CancellationError()
            }
        ) { 42 }
        XCTAssertEqual(v, 42)
        // The timer is cancelled when the body finishes: it never reaches onTimeout.
        try await Task.sleep(for: .milliseconds(400))
        XCTAssertEqual(fired.load(ordering: .relaxed), 0)
    }

    func testSlowBodyTimesOutEvenIfItIgnoresCancellation() async throws {
        struct Late: Error {}
        let start = Date()
        do {
            _ = try await withTimeout(0.2, onTimeout: { Late() }) {
                let end = Date() + 1
                while Date() < end { try? await Task.sleep(for: .milliseconds(20)) }  // ignores cancellation
                return 1
            }
            XCTFail("expected a timeout")
        } catch is Late {}
        XCTAssertLessThan(Date().timeIntervalSince(start), 0.9)
    }
}
