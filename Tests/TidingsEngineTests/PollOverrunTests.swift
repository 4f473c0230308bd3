import Foundation
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI

/// Blocks a thread in its poll until released, ignoring cancellation, as CPU-bound parsing
/// that goes on after the timeout does.
private final class StuckProvider: Provider, @unchecked Sendable {
    let entered = Mutex(false)
    let release = DispatchSemaphore(value: 0)
    func poll(_ ctx: PollContext) async throws -> PollResult {
        entered.withLock { $0 = true }
        release.wait()
        return .snapshot([])
    }
}

/// Issue 30, "the daemon's health says when polls are overrunning": a poll whose timeout
/// passed fails and the schedule goes on, but its work does not stop; such a poll counts as
/// overrunning (``PollOverruns``) until its work returns, for the gauge, the status line,
/// `tidings status` and the status page (``DaemonPulse``).
final class PollOverrunTests: XCTestCase {
    func testAPollStillRunningPastItsTimeoutIsOverrunningUntilItReturns() async throws {
        let env = ManualEnvironment()
        let store = try makeTestStore()
        let provider = StuckProvider()
        var settings = SourceSettings()
        settings.timeout = 0.05  // the runner gives up after timeout + 1 s (real time)
        let source = SourceConfig(
            name: "stuck", provider: "stuck", settings: settings, flapWindow: 0, instance: provider, file: "t", line: nil, configHash: "h")
        let pulse = PulseKeeper()
        let runner = PollRunner(store: store, http: testHTTP, env: env, overruns: pulse.overruns)

        let outcome = await runner.poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        XCTAssertEqual(outcome.error?.message, "timed out after 50ms")
        XCTAssertTrue(provider.entered.withLock { $0 })
        // The poll failed, but its work goes on: not overrunning before the deadline (virtual
        // clock), overrunning after it.
        XCTAssertEqual(pulse.overruns.overrunning(at: env.now()), [])
        env.time = env.now().addingTimeInterval(2)  // whole seconds: the file keeps seconds
        XCTAssertEqual(pulse.overruns.overrunning(at: env.now()), ["stuck"])
        let now = env.now()
        pulse.tick(now)
        let p = pulse.pulse(now)
        XCTAssertEqual(p.overrunning, ["stuck"])
        XCTAssertEqual(p.reasons(now: now), ["1 poll running past its timeout (stuck)"])
        XCTAssertEqual(DaemonPulse(json: try JSONParser.parse(p.json.jsonString())), p, "written and read back")

        provider.release.signal()
        for _ in 0..<2000 where !pulse.overruns.overrunning(at: env.now()).isEmpty {
            try await Task.sleep(for: .milliseconds(5))
        }
        XCTAssertEqual(pulse.overruns.overrunning(at: env.now()), [], "its work returned")
        XCTAssertEqual(pulse.pulse(env.now()).reasons(now: env.now()), [])
    }

    /// A scheduler loop that stopped passing is stalled after ``DaemonPulse/stallAfter``.
    func testAStalledSchedulerLoop() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        let pulse = DaemonPulse(tickAt: t0, overrunning: ["a", "b", "a"], at: t0)
        XCTAssertNil(pulse.stall(now: t0.addingTimeInterval(DaemonPulse.stallAfter)))
        XCTAssertEqual(
            pulse.stall(now: t0.addingTimeInterval(95)), "the daemon's scheduler has not run for 1m35s (stalled; polls are not started)")
        XCTAssertEqual(
            pulse.reasons(now: t0.addingTimeInterval(95)),
            ["3 polls running past their timeout (a, b)", "the daemon's scheduler has not run for 1m35s (stalled; polls are not started)"])
        XCTAssertNil(DaemonPulse(tickAt: nil, overrunning: [], at: t0).stall(now: t0.addingTimeInterval(1e6)), "not started yet")
    }
}
