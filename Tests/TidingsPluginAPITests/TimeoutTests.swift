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

final class WorkStopTests: XCTestCase {
    /// The timed body runs with a ``WorkStop`` that its deadline trips: CPU-bound work checking
    /// it in its loops ends soon after the timeout, instead of going on on the daemon's pool.
    func testTheTimeoutStopsWorkThatChecks() async throws {
        struct Late: Error {}
        let finished = Mutex<Int?>(nil)
        do {
            _ = try await withTimeout(0.2, onTimeout: { Late() }) {
                var rounds = 0
                // A parser's loop: never suspends, only checks.
                while !WorkStop.requested, rounds < 100_000_000 { rounds += 1 }
                finished.withLock { $0 = rounds }
                return rounds
            }
            XCTFail("expected a timeout")
        } catch is Late {}
        let deadline = Date() + 20
        while finished.withLock({ $0 }) == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        XCTAssertNotNil(finished.withLock { $0 }, "the loop stopped")
        XCTAssertLessThan(finished.withLock { $0 } ?? .max, 100_000_000, "by the stop, not its own bound")
    }

    func testActionsRunOnStopAndAtOnceWhenAlreadyStopped() {
        let stop = WorkStop()
        let calls = Mutex(0)
        stop.whileRunning(onStop: { calls.withLock { $0 += 1 } }) { stop.stop() }
        stop.whileRunning(onStop: { calls.withLock { $0 += 10 } }) {}
        XCTAssertEqual(calls.withLock { $0 }, 11)
        XCTAssertTrue(stop.isStopped)
        let other = WorkStop()
        other.whileRunning(onStop: { calls.withLock { $0 += 100 } }) {}
        other.stop()
        XCTAssertEqual(calls.withLock { $0 }, 11, "an action is dropped once its body returns")
    }
}

final class TimeoutThreadTests: XCTestCase {
    func testDeadlinesRunInTheirOrderAndACancelledOneNever() throws {
        let timers = TimeoutThread()
        let ran = Mutex<[String]>([])
        let done = expectation(description: "the last deadline ran")
        _ = timers.schedule(after: 0.30) {
            ran.withLock { $0.append("c") }
            done.fulfill()
        }
        _ = timers.schedule(after: 0.10) { ran.withLock { $0.append("a") } }
        let cancelled = timers.schedule(after: 0.05) { ran.withLock { $0.append("cancelled") } }
        _ = timers.schedule(after: 0.20) { ran.withLock { $0.append("b") } }
        timers.cancel(cancelled)
        wait(for: [done], timeout: 5)
        XCTAssertEqual(ran.withLock { $0 }, ["a", "b", "c"])
        XCTAssertEqual(timers.pending, 0)
    }

    func testAnEarlierDeadlineWakesTheThreadFromALongerWait() throws {
        let timers = TimeoutThread()
        let done = expectation(description: "the early deadline ran")
        _ = timers.schedule(after: 60) {}
        Thread.sleep(forTimeInterval: 0.05)  // the thread now sleeps until the 60 s deadline
        let start = Date()
        _ = timers.schedule(after: 0.05) { done.fulfill() }
        wait(for: [done], timeout: 5)
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)
        XCTAssertEqual(timers.pending, 1)
    }

    func testTimeoutsThatDoNotFireLeaveNothingBehind() async throws {
        let before = TimeoutThread.shared.pending
        for i in 0..<1000 {
            let v = try await withTimeout(30, onTimeout: { CancellationError() }) { i }
            XCTAssertEqual(v, i)
        }
        // Each body cancelled its deadline on the way out: none is left to run for 30 s.
        XCTAssertEqual(TimeoutThread.shared.pending, before)
    }
}
