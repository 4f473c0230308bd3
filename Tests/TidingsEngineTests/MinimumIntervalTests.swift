import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Answers each poll with the next scripted result (the last one repeats).
final class PacedProvider: Provider, @unchecked Sendable {
    let lock = NSLock()
    var script: [Result<PollResult, PollError>]
    var polls = 0
    init(_ script: [Result<PollResult, PollError>]) { self.script = script }
    func poll(_ ctx: PollContext) async throws -> PollResult {
        try lock.withLock {
            polls += 1
            return try (script.count > 1 ? script.removeFirst() : script[0]).get()
        }
    }
}

/// A remote's own minimum interval between polls (``PollResult/minimumInterval``, e.g. GitHub's
/// `X-Poll-Interval`): the schedule never polls sooner, the state keeps it for a restart and
/// for `tidings check`, and `tidings sources` can show it.
final class MinimumIntervalTests: XCTestCase {
    let env = FixedEnvironment(draw: 0.5)

    func source(_ p: PacedProvider, interval: TimeInterval = 1, jitter: Double = 0) -> SourceConfig {
        var s = SourceSettings()
        s.interval = interval
        s.jitter = jitter
        s.maxBackoff = 3600
        return SourceConfig(name: "gh", provider: "paced", settings: s, flapWindow: 0, instance: p, file: "t", line: nil, configHash: "h")
    }

    /// `check`: a one-shot `tidings check` (no daemon); `onRequest`: a poll on request while the
    /// daemon owns the state (`tidings check` through it).
    func poll(_ runner: PollRunner, _ src: SourceConfig, check: Bool = false, onRequest: Bool = false) async -> PollOutcome {
        var options = RecordOptions(router: nil)
        options.callerReportsFailures = check
        if onRequest { options.accounting = .uncounted }
        return await runner.poll(src, options: options, logger: quietLogger)
    }

    /// A store, a provider answering every poll with a 60 s minimum interval, its source, a runner.
    func paced60() throws -> (StateStore, PacedProvider, SourceConfig, PollRunner) {
        let store = try makeTestStore()
        let p = PacedProvider([.success(.snapshot([]).paced(every: 60))])
        return (store, p, source(p), PollRunner(store: store, http: testHTTP, env: env))
    }

    func stored(_ store: StateStore) throws -> (minInterval: Double?, notBefore: Double?) {
        let row = try store.database.read { try $0.fetchOne("SELECT min_interval, not_before FROM source_state WHERE source = 'gh'") }!
        return (try row[0], try row[1])
    }

    func testPacedResultHelper() {
        XCTAssertEqual(PollResult.notModified.paced(every: 60).minimumInterval, 60)
        XCTAssertNil(PollResult.notModified.paced(every: 0).minimumInterval, "zero is no minimum")
        XCTAssertNil(PollResult.notModified.paced(every: -5).minimumInterval)
        XCTAssertNil(PollResult.notModified.paced(every: .infinity).minimumInterval)
        XCTAssertEqual(PollResult.snapshot([]).paced(every: 1e9).minimumInterval, PollResult.maxMinimumInterval, "capped")
        XCTAssertNil(PollResult.snapshot([]).minimumInterval)
    }

    func testSuccessWaitsAtLeastTheRemoteMinimumAndStoresIt() async throws {
        let store = try makeTestStore()
        let p = PacedProvider([
            .success(.snapshot([]).paced(every: 60)), .success(PollResult.notModified.paced(every: 120)),
            .success(.snapshot([])),
        ])
        let src = source(p, interval: 1)
        let runner = PollRunner(store: store, http: testHTTP, env: env)
        let t0 = env.time

        var out = await poll(runner, src)
        XCTAssertNil(out.error)
        XCTAssertEqual(out.nextDue.timeIntervalSince(t0), 60, "interval 1s, but the remote allows one poll a minute")
        XCTAssertEqual(try stored(store).minInterval, 60)
        XCTAssertEqual(try stored(store).notBefore, t0.timeIntervalSince1970 + 60)
        XCTAssertEqual(try store.statuses()["gh"]?.minInterval, 60)

        // It rises under load (a 304 carries it too).
        env.time = t0 + 60
        out = await poll(runner, src)
        XCTAssertEqual(out.nextDue.timeIntervalSince(env.time), 120)
        XCTAssertEqual(try stored(store).minInterval, 120)

        // A result without one: the configured interval rules again.
        env.time = t0 + 180
        out = await poll(runner, src)
        XCTAssertEqual(out.nextDue.timeIntervalSince(env.time), 1)
        XCTAssertNil(try stored(store).minInterval)
        XCTAssertNil(try stored(store).notBefore)
        XCTAssertNil(try store.statuses()["gh"]?.minInterval)
    }

    func testAConfiguredIntervalLongerThanTheMinimumIsKept() async throws {
        let store = try makeTestStore()
        let out = await poll(
            PollRunner(store: store, http: testHTTP, env: env), source(PacedProvider([.success(.snapshot([]).paced(every: 60))]), interval: 300))
        XCTAssertEqual(out.nextDue.timeIntervalSince(env.time), 300)
    }

    func testAFailureKeepsTheStoredMinimumAsAFloor() async throws {
        let store = try makeTestStore()
        let p = PacedProvider([
            .success(.snapshot([]).paced(every: 60)), .failure(PollError(.transient, "HTTP 502")),
            .failure(PollError(.rateLimited, "HTTP 429", retryAfter: 600)),
        ])
        let src = source(p, interval: 1)
        let runner = PollRunner(store: store, http: testHTTP, env: env)
        _ = await poll(runner, src)
        env.time += 60
        var out = await poll(runner, src)
        // Backoff alone would be 1 s × 2¹ = 2 s.
        XCTAssertEqual(out.nextDue.timeIntervalSince(env.time), 60, "a failure does not poll faster than the remote allows")
        XCTAssertEqual(try stored(store).minInterval, 60, "kept through a failure")
        XCTAssertEqual(try stored(store).notBefore, env.time.timeIntervalSince1970 + 60)
        // A longer Retry-After wins.
        env.time += 60
        out = await poll(runner, src)
        XCTAssertEqual(out.nextDue.timeIntervalSince(env.time), 600)
    }

    func testRestartHonoursIt() async throws {
        let store = try makeTestStore()
        let src = source(PacedProvider([.success(.snapshot([]).paced(every: 60))]), interval: 1)
        _ = await poll(PollRunner(store: store, http: testHTTP, env: env), src)
        let t0 = env.time
        // Restarted 10 s later, with the 1 s interval: not before the minute is up.
        let reopened = try reopenTestStore(store)
        let schedule = try await reopened.database.read { try StoredSchedule.all($0, names: ["gh"]) }.schedules[0]!
        let due = schedule.firstDue(settings: src.settings, now: t0 + 10, spread: 2, unit: 0.5)
        XCTAssertEqual(due.timeIntervalSince(t0), 60)
    }

    func testACheckDoesNotPollSoonerButASourceWithoutAMinimumIsPolled() async throws {
        let (_, p, src, runner) = try paced60()
        _ = await poll(runner, src, check: true)
        env.time += 30
        var out = await poll(runner, src, check: true)
        XCTAssertEqual(p.polls, 1, "a check within the minimum interval does not reach the remote")
        XCTAssertEqual(out.error?.category, .rateLimited)
        XCTAssertTrue(out.error?.message.contains("one poll every 1m") == true, "\(String(describing: out.error))")
        env.time += 30
        out = await poll(runner, src, check: true)
        XCTAssertNil(out.error)
        XCTAssertEqual(p.polls, 2, "once the minute is up it polls")

        // A Retry-After alone does not stop a one-shot check (it never has: only the schedule waits).
        let q = PacedProvider([.failure(PollError(.rateLimited, "HTTP 429", retryAfter: 600)), .success(.snapshot([]))])
        let other = SourceConfig(name: "plain", provider: "paced", settings: src.settings, flapWindow: 0, instance: q, file: "t", line: nil, configHash: "h")
        _ = await poll(runner, other, check: true)
        out = await poll(runner, other, check: true)
        XCTAssertNil(out.error)
        XCTAssertEqual(q.polls, 2)
    }

    func testAPollOnRequestWhileTheDaemonOwnsTheStateKeepsItToo() async throws {
        let (store, p, src, runner) = try paced60()
        var out = await poll(runner, src, onRequest: true)
        XCTAssertNil(out.error)
        XCTAssertEqual(try stored(store).minInterval, 60)
        XCTAssertEqual(try stored(store).notBefore, env.time.timeIntervalSince1970 + 60)
        env.time += 30
        out = await poll(runner, src, onRequest: true)
        XCTAssertEqual(p.polls, 1, "the daemon's poll on request does not reach the remote sooner either")
        XCTAssertEqual(out.error?.category, .rateLimited)
    }

    func testAScheduledPollAfterAPollOnRequestWaitsForTheInterval() async throws {
        let (_, p, src, runner) = try paced60()
        _ = await poll(runner, src, onRequest: true)
        let t0 = env.time
        // The schedule had the source due 10 s later (its 1 s interval).
        env.time = t0 + 10
        var out = await poll(runner, src)
        XCTAssertEqual(p.polls, 1, "no request within the remote's interval")
        guard case .deferred(let until) = out else { return XCTFail("\(out)") }
        XCTAssertEqual(until, t0 + 60)
        XCTAssertNil(out.error)
        XCTAssertEqual(out.next?.store, true, "the scheduler stores the deferred due time")
        env.time = t0 + 60
        out = await poll(runner, src)
        guard case .succeeded = out else { return XCTFail("\(out)") }
        XCTAssertEqual(p.polls, 2)
    }

    /// issue 30 item 9: a poll on request that receives a Retry-After keeps it (not counted as a
    /// failure): the next poll on request within it, and the schedule, make no request.
    func testAPollOnRequestKeepsTheRetryAfterItReceived() async throws {
        let store = try makeTestStore()
        let p = PacedProvider([.success(.snapshot([])), .failure(PollError(.rateLimited, "HTTP 429", retryAfter: 120)), .success(.snapshot([]))])
        let src = source(p, interval: 1)
        let runner = PollRunner(store: store, http: testHTTP, env: env)
        _ = await poll(runner, src)
        let t0 = env.time
        var out = await poll(runner, src, onRequest: true)
        XCTAssertEqual(p.polls, 2)
        XCTAssertEqual(out.error?.message, "HTTP 429")
        XCTAssertEqual(try stored(store).notBefore, t0.timeIntervalSince1970 + 120)
        let row = try await store.database.read { try $0.fetchOne("SELECT failures FROM source_state WHERE source = 'gh'") }!
        XCTAssertEqual(try row[0] as Int, 0, "not counted as a failure")
        env.time = t0 + 30
        out = await poll(runner, src, onRequest: true)
        XCTAssertEqual(p.polls, 2, "no request within the Retry-After")
        XCTAssertEqual(out.error?.category, .rateLimited)
        XCTAssertTrue(out.error?.message.contains("Retry-After") == true, out.error?.message ?? "")
        out = await poll(runner, src)
        guard case .deferred(let until) = out else { return XCTFail("the schedule waits too: \(out)") }
        XCTAssertEqual(until, t0 + 120)
        XCTAssertEqual(p.polls, 2)
        env.time = t0 + 120
        out = await poll(runner, src, onRequest: true)
        XCTAssertNil(out.error)
        XCTAssertEqual(p.polls, 3)
    }
}

private extension PollOutcome {
    /// When the schedule polls the source next (stored or not).
    var nextDue: Date { next?.due ?? .distantFuture }
}
