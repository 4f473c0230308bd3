import Foundation
@testable import TidingsCore
import XCTest

/// Counts polls per source.
final class CountingProvider: Provider, @unchecked Sendable {
    let lock = NSLock()
    var polls = 0
    func poll(_ ctx: PollContext) async throws -> PollResult {
        lock.withLock { polls += 1 }
        return .snapshot([])
    }
    var count: Int { lock.withLock { polls } }
}

final class SchedulerTests: XCTestCase {
    func waitUntil(_ what: String, timeout: Double = 10, _ cond: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !cond() {
            if Date() > deadline { XCTFail("timed out waiting for \(what)"); return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func testSpreadAtStartThenCatchUpAfterSuspend() async throws {
        let store = try StateStore.open(directory: try scratchDirectory(), logger: quietLogger)
        let providers = (0..<3).map { _ in CountingProvider() }
        var settings = SourceSettings()
        settings.interval = 3600
        settings.jitter = 0
        let sources = providers.enumerated().map { i, p in
            SourceConfig(name: "s\(i)", provider: "counting", settings: settings, flapWindow: 0, instance: p, file: "t", line: nil, configHash: "h")
        }
        let config = try loadConfig("")
        var cfg = config
        cfg.sources = sources
        let env = FixedEnvironment(draw: 0.5)
        let t0 = env.time
        let scheduler = Scheduler(config: cfg, runner: PollRunner(store: store, http: CurlHTTPClient(), env: env),
                                  router: Router(routes: [], allSinks: []), env: env, logger: quietLogger, onEvents: {})
        let task = Task { await scheduler.run() }

        // Start-up spread: due within the spread window (2 s × draw 0.5 = 1 s), not at once.
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(providers.map(\.count), [0, 0, 0], "nothing polled before its spread start time")
        env.time = t0 + 1.1
        try await waitUntil("first polls") { providers.allSatisfy { $0.count == 1 } }

        // Nothing more within the hour.
        env.time = t0 + 1.5
        try await Task.sleep(for: .milliseconds(1300))
        XCTAssertEqual(providers.map(\.count), [1, 1, 1])

        // A suspend: the wall clock jumps 3 hours. Overdue sources are rescheduled soon
        // (spread over the window), not polled in one burst at the jump.
        env.time = t0 + 3 * 3600
        try await Task.sleep(for: .milliseconds(1300))
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "rescheduled into the spread window, not polled at the jump")
        env.time = t0 + 3 * 3600 + 1.1
        try await waitUntil("catch-up polls") { providers.allSatisfy { $0.count == 2 } }

        await scheduler.stop()
        await task.value
        let stats = await scheduler.lateness
        XCTAssertEqual(stats.count, 6)
    }
}
