import Foundation
import TidingsCurl
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

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

/// Waits (real time, briefly) until `scheduler` rests on its virtual clock: no poll in flight
/// and its loop asleep on `clock`. After a move of the clock, a poll due by then has run.
func idle(_ scheduler: Scheduler, _ clock: ManualEnvironment) async throws {
    try await clock.settled("the scheduler at rest") { await scheduler.pollsInFlight == 0 && clock.sleepers > 0 }
}

/// Three sources polled hourly, without jitter, each counting its polls, and their scheduler
/// on a virtual clock.
func threeHourlySources(timerSlack: TimeInterval = 0) throws -> ([CountingProvider], Scheduler, FixedEnvironment) {
    let providers = (0..<3).map { _ in CountingProvider() }
    var settings = SourceSettings()
    settings.interval = 3600
    settings.jitter = 0
    var cfg = try loadConfig("")
    cfg.sources = providers.enumerated().map { i, p in
        SourceConfig(name: "s\(i)", provider: "counting", settings: settings, flapWindow: 0, instance: p, file: "t", line: nil, configHash: "h")
    }
    let env = FixedEnvironment(draw: 0.5)
    let scheduler = Scheduler(
        config: cfg, runner: PollRunner(store: try makeTestStore(), http: CurlHTTPClient(), env: env),
        router: Router(routes: [], allSinks: []), env: env, host: HostConditions(), timerSlack: timerSlack, logger: quietLogger, onEvents: {})
    return (providers, scheduler, env)
}

final class SchedulerTests: XCTestCase {
    func testSpreadAtStartThenCatchUpAfterSuspend() async throws {
        let (providers, scheduler, env) = try threeHourlySources()
        let t0 = env.time
        let task = Task { await scheduler.run() }
        let settle = { try await idle(scheduler, env) }
        try await settle()

        // Start-up spread: due within the spread window (2 s × draw 0.5 = 1 s), not at once.
        XCTAssertEqual(providers.map(\.count), [0, 0, 0], "nothing polled before its spread start time")
        XCTAssertEqual(env.nextDeadline, t0 + 1, "the loop sleeps until the first due time")
        try await env.advance(to: t0 + 0.9, settle: settle)
        XCTAssertEqual(providers.map(\.count), [0, 0, 0], "nothing polled before its spread start time")
        try await env.advance(to: t0 + 1, settle: settle)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "the first polls")

        // Nothing more within the hour (the loop wakes every second meanwhile).
        try await env.advance(to: t0 + 5, settle: settle)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1])

        // A suspend: the wall clock jumps 3 hours. Overdue sources are rescheduled soon
        // (spread over the window), not polled in one burst at the jump.
        try await env.jump(to: t0 + 3 * 3600, settle: settle)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "rescheduled into the spread window, not polled at the jump")
        try await env.advance(to: t0 + 3 * 3600 + 1, settle: settle)
        XCTAssertEqual(providers.map(\.count), [2, 2, 2], "the catch-up polls")

        await scheduler.stop()
        await task.value
        let stats = await scheduler.lateness
        XCTAssertEqual(stats.count, 6)
    }

    func testWithTimerSlackTheLoopSleepsTheSlackAndThenStartsWhatFellDue() async throws {
        let (providers, scheduler, env) = try threeHourlySources(timerSlack: 5)
        let t0 = env.time
        let task = Task { await scheduler.run() }
        let settle = { try await idle(scheduler, env) }
        try await settle()

        // Due at t0 + 1 (the start-up spread), but the loop sleeps its slack of 5 s.
        XCTAssertEqual(env.nextDeadline, t0 + 5, "the loop sleeps the slack, not until the first due time")
        try await env.advance(to: t0 + 4.9, settle: settle)
        XCTAssertEqual(providers.map(\.count), [0, 0, 0], "nothing starts before the loop wakes")
        try await env.advance(to: t0 + 5, settle: settle)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "one wake-up starts every poll that fell due meanwhile")

        await scheduler.stop()
        await task.value
        let stats = await scheduler.lateness
        XCTAssertEqual(stats.maximum, 4, accuracy: 1e-6, "late by the slack at most")
    }
}

/// The rule for resuming a stored schedule under the settings now loaded (reload, restart).
final class StoredScheduleTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func settings(interval: TimeInterval, jitter: Double = 0.1, maxBackoff: TimeInterval = 3600) -> SourceSettings {
        var s = SourceSettings()
        s.interval = interval
        s.jitter = jitter
        s.maxBackoff = maxBackoff
        return s
    }

    func first(_ stored: StoredSchedule, _ s: SourceSettings, unit: Double = 0.5) -> TimeInterval {
        stored.firstDue(settings: s, now: now, spread: 2, unit: unit).timeIntervalSince(now)
    }

    func testAfterSuccessADueTimeWithinTheJitteredIntervalIsKept() {
        let s = settings(interval: 1800)
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 1000), s), 1000)
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 1980), s), 1980, "interval × (1 + jitter) is the longest wait")
    }

    func testAfterSuccessAShorterIntervalReschedulesWithinIt() {
        // 30m → 3s: the stored due time (29 minutes away) does not fit; the next poll is
        // within the new jittered interval, not in 29 minutes.
        let s = settings(interval: 3)
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 1740), s, unit: 0.5), 3, accuracy: 1e-6)
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 1740), s, unit: 0.99), 3.294, accuracy: 1e-6)
        // 30m → 10m: due in 20 minutes does not fit either.
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 1200), settings(interval: 600, jitter: 0)), 600)
    }

    func testAfterFailuresTheBackoffForThatCountIsTheLimit() {
        let s = settings(interval: 60, jitter: 0, maxBackoff: 3600)
        // 2 failures: the wait is min(60 × 2², 3600) = 240 s.
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 200, failures: 2), s), 200, "within the backoff: kept")
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 3000, failures: 2), s), 240, "beyond it: the new backoff")
        // A lower max_backoff caps it.
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 3000, failures: 6), settings(interval: 60, jitter: 0, maxBackoff: 300)), 300)
    }

    func testRetryAfterIsHonouredEvenBeyondTheBackoff() {
        // 429 with Retry-After: 2h; interval 1s and max_backoff 1h would allow far less.
        let s = settings(interval: 1, jitter: 0.1, maxBackoff: 3600)
        let stored = StoredSchedule(nextDue: now + 7200, failures: 1, notBefore: now + 7200)
        XCTAssertEqual(first(stored, s), 7200)
        // Never sooner than Retry-After, even for a due time that would otherwise be pulled in
        // or one that is overdue.
        XCTAssertEqual(first(StoredSchedule(nextDue: now + 5, failures: 1, notBefore: now + 90), s), 90)
        XCTAssertEqual(first(StoredSchedule(nextDue: now - 5, failures: 1, notBefore: now + 90), s), 90)
        // A Retry-After in the past no longer matters.
        XCTAssertEqual(first(StoredSchedule(nextDue: now - 5, failures: 1, notBefore: now - 10), s), 1)
    }

    func testNewAndOverdueSourcesStartSpread() {
        let s = settings(interval: 1800)
        XCTAssertEqual(first(StoredSchedule(nextDue: nil), s, unit: 0.25), 0.5, "spread window 2 s × draw 0.25")
        XCTAssertEqual(first(StoredSchedule(nextDue: now - 600), s, unit: 0.75), 1.5)
    }
}

/// Resuming the schedule through the real scheduler and state (reload and restart build a
/// new ``Scheduler`` on the same state), and polls on request beside the schedule.
final class SchedulerStateTests: XCTestCase {
    var store: StateStore!
    var env: FixedEnvironment!
    var t0 = Date()

    override func setUpWithError() throws {
        store = try makeTestStore()
        env = FixedEnvironment(draw: 0.5)
        t0 = env.time
    }

    func source(_ name: String, _ provider: any Provider, interval: TimeInterval, jitter: Double = 0) -> SourceConfig {
        var settings = SourceSettings()
        settings.interval = interval
        settings.jitter = jitter
        settings.errorThreshold = 1
        return SourceConfig(name: name, provider: "test", settings: settings, flapWindow: 0, instance: provider, file: "t", line: nil, configHash: "h")
    }

    func scheduler(_ sources: [SourceConfig], host: HostConditions = HostConditions()) throws -> (Scheduler, PollRunner) {
        var config = try loadConfig("")
        config.sources = sources
        let runner = PollRunner(store: store, http: CurlHTTPClient(), env: env)
        return (
            Scheduler(
                config: config, runner: runner, router: Router(routes: [], allSinks: []), env: env, host: host,
                logger: quietLogger, onEvents: {}), runner
        )
    }

    func status(_ name: String) throws -> SourceStatus { try XCTUnwrap(try store.statuses()[name]) }

    /// Waits until `scheduler` rests: its polls done, its loop asleep on the virtual clock.
    func settle(_ scheduler: Scheduler) async throws { try await idle(scheduler, env) }

    /// Starts the scheduler and lets it seed its queue at the current (virtual) time.
    func start(_ scheduler: Scheduler) async throws -> Task<Void, Never> {
        let task = Task { await scheduler.run() }
        try await settle(scheduler)
        return task
    }

    /// Moves the clock to `date` as time passes: the scheduler's loop runs every pass it
    /// would have run, and each poll finishes at the instant it started.
    func advance(to date: Date, _ scheduler: Scheduler) async throws {
        try await env.advance(to: date) { try await self.settle(scheduler) }
    }

    func seconds(_ d: Date?) -> Double { d?.timeIntervalSince1970 ?? .nan }

    /// Jumps the clock to `date` (it looks like a suspend) and moves on past the spread the
    /// scheduler gives overdue sources after such a jump: 1 s at most with the draw of 0.5.
    func jump(to date: Date, _ scheduler: Scheduler) async throws {
        try await env.jump(to: date) { try await self.settle(scheduler) }
        try await advance(to: date + 2, scheduler)
    }

    func waitUntil(_ what: String, _ cond: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(10)
        while try !cond() {
            if Date() > deadline {
                XCTFail("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func testAShorterIntervalAppliesToTheStoredDueTime() async throws {
        // A poll under interval 30m stored its next due time 30 minutes ahead.
        let p = CountingProvider()
        try await PollRecorder(store: store).setNextDue("s", provider: "test", at: t0 + 1800)
        let (scheduler, _) = try scheduler([source("s", p, interval: 3)])
        let task = try await start(scheduler)
        try await advance(to: t0 + 2.9, scheduler)
        XCTAssertEqual(p.count, 0)
        try await advance(to: t0 + 3, scheduler)
        XCTAssertEqual(p.count, 1, "a poll within the new 3 s interval")
        await scheduler.stop()
        await task.value
        XCTAssertEqual(seconds(try status("s").nextDue), seconds(t0 + 3 + 3), accuracy: 1e-3, "then every 3 s")
    }

    func testRetryAfterStoredWithAFailureIsHonouredAfterARestart() async throws {
        let p = ScriptedProvider()
        p.failure = PollError(.rateLimited, "HTTP 429", retryAfter: 7200)
        let limited = source("s", p, interval: 1)
        let (first, _) = try scheduler([limited])
        let task = try await start(first)
        // Polled at the start-up spread (1 s × draw 0.5).
        try await advance(to: t0 + 2, first)
        XCTAssertEqual(try status("s").failures, 1, "the failed poll")
        await first.stop()
        await task.value
        XCTAssertEqual(seconds(try status("s").nextDue), seconds(t0 + 0.5 + 7200), accuracy: 1e-3)

        // Restart: the same settings allow at most 2.2 s after one failure, but the server said 2 h.
        p.failure = nil
        env.time = t0 + 60
        let (second, _) = try scheduler([limited])
        let again = try await start(second)
        try await advance(to: t0 + 63, second)  // past the start-up spread
        XCTAssertEqual(try status("s").failures, 1, "not polled before Retry-After")
        try await jump(to: t0 + 0.5 + 7200, second)
        XCTAssertEqual(try status("s").failures, 0, "the poll after Retry-After")
        await second.stop()
        await again.value
    }

    func testAPollOnRequestDoesNotMoveTheScheduleOrCountAFailure() async throws {
        let p = ScriptedProvider()
        let s = source("s", p, interval: 3600)
        let (scheduler, _) = try scheduler([s])
        let task = try await start(scheduler)
        try await advance(to: t0 + 2.5, scheduler)
        XCTAssertNotNil(try status("s").lastSuccess, "the baseline")
        let before = try status("s")

        // A failure on request: reported to the caller, nothing recorded.
        p.failure = PollError(.transient, "HTTP 500")
        let failed = await scheduler.pollNow([s])
        XCTAssertEqual(failed.map { $0.error?.message }, ["HTTP 500"])
        var after = try status("s")
        XCTAssertEqual(after.failures, 0)
        XCTAssertNil(after.lastError)
        XCTAssertEqual(after.nextDue, before.nextDue)
        XCTAssertEqual(try store.historyEvents(source: nil, limit: 10).count, 0, "no error event (error_threshold = 1)")

        // A success on request: its events are recorded (and routed); the schedule stays.
        p.failure = nil
        p.items = [Item(key: "1", kind: "k", title: "one")]
        try await advance(to: t0 + 10, scheduler)
        let ok = await scheduler.pollNow([s])
        XCTAssertEqual(ok.first?.record.events.map(\.key), ["1"])
        after = try status("s")
        XCTAssertEqual(after.nextDue, before.nextDue)
        XCTAssertEqual(seconds(after.lastSuccess), seconds(t0 + 10), accuracy: 1e-3)

        // After counted failures, a success on request neither resets them nor reports recovery.
        p.failure = PollError(.transient, "HTTP 503")
        try await jump(to: try XCTUnwrap(after.nextDue), scheduler)
        XCTAssertEqual(try status("s").failures, 1, "a counted failure")
        let failing = try status("s")
        p.failure = nil
        _ = await scheduler.pollNow([s])
        after = try status("s")
        XCTAssertEqual(after.failures, 1)
        XCTAssertEqual(after.nextDue, failing.nextDue)
        XCTAssertEqual(try store.historyEvents(source: nil, limit: 10).map(\.event), [.new, .error], "no `recovered` on request")
        await scheduler.stop()
        await task.value
    }

    func testAScheduledPollDueDuringAPollOnRequestRunsAfterIt() async throws {
        let gate = GatedProvider()
        let s = source("s", gate, interval: 3600)
        let (scheduler, _) = try scheduler([s])
        let task = try await start(scheduler)
        let request = Task { await scheduler.pollNow([s]) }
        try await waitUntil("the poll on request to start") { gate.started == 1 }
        // The scheduled (spread) first poll comes due meanwhile, at t0 + 1; the loop passes
        // (and goes back to sleep) at t0 + 1 and t0 + 2 with the poll on request in flight.
        try await env.advance(to: t0 + 2.5)
        XCTAssertEqual(gate.started, 1, "never two polls of one source at once")
        gate.open()
        _ = await request.value
        try await settle(scheduler)
        XCTAssertEqual(gate.started, 2, "the deferred scheduled poll, once")
        await scheduler.stop()
        await task.value
    }

    // MARK: max_concurrent saturated (issue 33: lateness under load)

    /// `max_concurrent = 1`: "a" (gated) first due at t0 + 1 (the start-up spread), then the
    /// sources of `due` at their stored due times, each recording the order it was polled in.
    func saturated(_ due: [(String, Date)]) async throws -> (GatedProvider, OrderProvider, Scheduler, Task<Void, Never>) {
        let gate = GatedProvider()
        let order = OrderProvider()
        for (name, at) in due { try await PollRecorder(store: store).setNextDue(name, provider: "test", at: at) }
        var config = try loadConfig("")
        config.maxConcurrent = 1
        config.sources = [source("a", gate, interval: 3600)] + due.map { source($0.0, order, interval: 3600) }
        let scheduler = Scheduler(
            config: config, runner: PollRunner(store: store, http: CurlHTTPClient(), env: env), router: Router(routes: [], allSinks: []),
            env: env, host: HostConditions(), logger: quietLogger, onEvents: {})
        let task = try await start(scheduler)
        try await env.advance(to: t0 + 1)
        try await waitUntil("the gated poll to start") { gate.started == 1 }
        return (gate, order, scheduler, task)
    }

    func testPollsWaitingForASlotStartInDueOrderTheMostOverdueFirst() async throws {
        let (gate, order, scheduler, task) = try await saturated([("z", t0 + 3), ("y", t0 + 2), ("x", t0 + 30)])
        try await env.advance(to: t0 + 20)
        XCTAssertEqual(order.names, [], "no slot while the gated poll runs")
        gate.open()
        try await settle(scheduler)
        XCTAssertEqual(order.names, ["y", "z"], "the earliest due first, one at a time")
        try await advance(to: t0 + 30, scheduler)
        XCTAssertEqual(order.names, ["y", "z", "x"])
        let stats = await scheduler.lateness
        XCTAssertEqual(stats.maximum, 18, accuracy: 1e-6, "y waited from t0 + 2 to t0 + 20")
        await scheduler.stop()
        await task.value
    }

    func testAPollWaitingForASlotStaysQueuedAndAPauseHoldsItBack() async throws {
        let (gate, order, scheduler, task) = try await saturated([("b", t0 + 2)])
        try await env.advance(to: t0 + 3)
        XCTAssertEqual(order.names, [], "due, but no slot")
        await scheduler.networkChanged(.offline)
        gate.open()
        try await settle(scheduler)
        try await advance(to: t0 + 6, scheduler)
        XCTAssertEqual(order.names, [], "no poll starts while offline, not even one that waited for a slot before")
        await scheduler.networkChanged(.online)
        try await settle(scheduler)
        try await advance(to: t0 + 9, scheduler)  // overdue: spread over 1 s
        XCTAssertEqual(order.names, ["b"], "polled once online")
        await scheduler.stop()
        await task.value
    }

    func testTheLatenessWindowKeepsTheLastMinute() {
        let window = LatenessWindow()
        XCTAssertNil(window.p99(now: t0))
        for i in 0..<100 { window.record(Double(i) / 10, at: t0) }  // 0 … 9.9 s late
        XCTAssertEqual(try XCTUnwrap(window.p99(now: t0 + 30)), 9.8, accuracy: 1e-9)
        var pulse = DaemonPulse(tickAt: t0 + 30, overrunning: [], at: t0 + 30, lateness: window.p99(now: t0 + 30))
        XCTAssertEqual(pulse.reasons(now: t0 + 30).count, 1, "behind by more than \(DaemonPulse.behindAfter) s")
        XCTAssertTrue(pulse.reasons(now: t0 + 30)[0].contains("behind by"), "\(pulse.reasons(now: t0 + 30))")
        XCTAssertEqual(DaemonPulse(json: pulse.json), pulse, "through tidings.pulse")
        window.record(0.1, at: t0 + 61)
        XCTAssertEqual(try XCTUnwrap(window.p99(now: t0 + 61)), 0.1, accuracy: 1e-9, "older than a minute: gone")
        pulse.lateness = window.p99(now: t0 + 61)
        pulse.tickAt = t0 + 61
        XCTAssertEqual(pulse.reasons(now: t0 + 61), [], "keeping up")
    }

    // MARK: sleep and network (the system bus's HostConditions)

    /// Three sources every 3 s, first polled at t0 + 1 (the start-up spread is 1 s with the
    /// draw of 0.5), so due again at t0 + 4.
    func startedThree() async throws -> ([CountingProvider], Scheduler, Task<Void, Never>) {
        let providers = (0..<3).map { _ in CountingProvider() }
        let (scheduler, _) = try scheduler(providers.enumerated().map { source("s\($0)", $1, interval: 3) })
        let task = try await start(scheduler)
        try await advance(to: t0 + 1, scheduler)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "the first polls")
        return (providers, scheduler, task)
    }

    /// Moves the clock to `date` (the loop wakes every second on the way): still one poll each.
    func assertNoMorePolls(_ providers: [CountingProvider], at date: Date, _ scheduler: Scheduler, _ why: String) async throws {
        try await advance(to: date, scheduler)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], why)
    }

    func testOfflinePausesPollsAndOnlinePollsTheOverdueSoonSpread() async throws {
        let (providers, scheduler, task) = try await startedThree()
        await scheduler.networkChanged(.offline)
        try await settle(scheduler)
        try await assertNoMorePolls(providers, at: t0 + 4.5, scheduler, "no poll starts while offline")  // all came due at t0 + 4

        // Online: the overdue ones are spread over the start-up window (2 s × 0.5), not one burst.
        await scheduler.networkChanged(.online)
        try await settle(scheduler)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "spread, not polled in one burst at the change")
        try await advance(to: t0 + 5.4, scheduler)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "spread over 1 s")
        try await advance(to: t0 + 5.5, scheduler)
        XCTAssertEqual(providers.map(\.count), [2, 2, 2], "the overdue polls")
        await scheduler.stop()
        await task.value
    }

    func testSleepPausesPollsAndResumePollsTheOverdueWithoutAClockJump() async throws {
        let (providers, scheduler, task) = try await startedThree()
        await scheduler.powerChanged(.goingToSleep)
        try await settle(scheduler)
        try await assertNoMorePolls(providers, at: t0 + 4.5, scheduler, "no poll starts while going to sleep")
        await scheduler.powerChanged(.awake)
        try await settle(scheduler)
        try await advance(to: t0 + 5.5, scheduler)
        XCTAssertEqual(providers.map(\.count), [2, 2, 2], "the overdue polls after resume")
        await scheduler.stop()
        await task.value
    }

    func testAClockJumpAfterGoingToSleepIsTheResumeAndStillOfflineKeepsThePause() async throws {
        let (providers, scheduler, task) = try await startedThree()
        await scheduler.update(HostConditions(network: .offline, power: .goingToSleep))
        try await settle(scheduler)
        // Slept 3 hours; no resume signal (yet). The network is still offline: no polls.
        try await env.jump(to: t0 + 3 * 3600) { try await self.settle(scheduler) }
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "the jump")
        try await assertNoMorePolls(providers, at: t0 + 3 * 3600 + 2, scheduler, "awake after the jump, but offline")
        // logind's late resume signal changes nothing more; the network coming back does.
        await scheduler.powerChanged(.awake)
        try await settle(scheduler)
        XCTAssertEqual(providers.map(\.count), [1, 1, 1], "the resume signal while offline")
        await scheduler.networkChanged(.online)
        try await settle(scheduler)
        try await advance(to: t0 + 3 * 3600 + 3, scheduler)
        XCTAssertEqual(providers.map(\.count), [2, 2, 2], "the overdue polls once online")
        await scheduler.stop()
        await task.value
    }

    func testAFailureWhileOfflineIsNotCountedAndTheSourceIsPolledWhenOnline() async throws {
        let gate = GatedProvider()
        gate.failure = PollError(.transient, "could not resolve host")
        let (scheduler, _) = try scheduler([source("s", gate, interval: 3600)])  // error_threshold = 1
        let task = try await start(scheduler)
        try await env.advance(to: t0 + 1.1)  // the first poll starts at t0 + 1 and waits at the gate
        try await waitUntil("the first poll to start") { gate.started == 1 }
        await scheduler.networkChanged(.offline)  // while it runs
        gate.open()
        try await settle(scheduler)
        var status = try status("s")
        XCTAssertEqual(seconds(status.nextDue), seconds(t0 + 1.1), accuracy: 1e-3, "due again at once")
        XCTAssertEqual(status.failures, 0, "not counted")
        XCTAssertNil(status.lastError)
        XCTAssertEqual(try store.historyEvents(source: nil, limit: 10).map(\.event), [], "no error event")

        // Online: due again at once (spread), and this failure counts.
        await scheduler.networkChanged(.online)
        try await settle(scheduler)
        try await advance(to: t0 + 2.1, scheduler)
        status = try self.status("s")
        XCTAssertEqual(status.failures, 1, "a counted failure")
        XCTAssertEqual(status.lastError, "could not resolve host")
        XCTAssertEqual(try store.historyEvents(source: nil, limit: 10).map(\.event), [.error])
        await scheduler.stop()
        await task.value
    }

    func testASchedulerBuiltWhileOfflineWaitsForTheNetwork() async throws {
        // A reload while offline hands the conditions to the new scheduler.
        let p = CountingProvider()
        let (scheduler, _) = try scheduler([source("s", p, interval: 3)], host: HostConditions(network: .offline))
        let task = try await start(scheduler)
        try await advance(to: t0 + 2.5, scheduler)
        XCTAssertEqual(p.count, 0)
        await scheduler.update(HostConditions(network: .offline))  // the same again: still paused
        try await advance(to: t0 + 3.5, scheduler)  // (the loop passes at t0 + 3)
        XCTAssertEqual(p.count, 0)
        await scheduler.update(HostConditions())
        try await settle(scheduler)
        try await advance(to: t0 + 4.5, scheduler)  // overdue: spread over 1 s
        XCTAssertEqual(p.count, 1, "the first poll once online")
        await scheduler.stop()
        await task.value
    }
}

/// Blocks each poll until opened; then fails with `failure`, if set.
final class GatedProvider: Provider, @unchecked Sendable {
    private let lock = NSLock()
    private var polls = 0
    private var isOpen = false
    var failure: PollError?
    var started: Int { lock.withLock { polls } }
    func open() { lock.withLock { isOpen = true } }
    func poll(_ ctx: PollContext) async throws -> PollResult {
        lock.withLock { polls += 1 }
        while !lock.withLock({ isOpen }) { try await Task.sleep(for: .milliseconds(10)) }
        if let failure { throw failure }
        return .snapshot([])
    }
}

/// Records the order in which its sources were polled.
final class OrderProvider: Provider, @unchecked Sendable {
    private let lock = NSLock()
    private var polled: [String] = []
    var names: [String] { lock.withLock { polled } }
    func poll(_ ctx: PollContext) async throws -> PollResult {
        lock.withLock { polled.append(ctx.source) }
        return .snapshot([])
    }
}
