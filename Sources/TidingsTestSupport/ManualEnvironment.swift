import Foundation
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// A virtual clock (and a fixed random draw) for tests, after swift-nio's `EmbeddedEventLoop`:
/// time moves only when the test moves it, and then it wakes the tasks sleeping on it
/// (``Environment/sleep(until:)``, a ``Wakeup``'s wait) whose deadline has passed, earliest
/// first, each seeing its own deadline as the time.
///
/// - ``advance(to:settle:)``: time passes; a loop that sleeps between passes runs every
///   pass it would have run, at the instant it would have run it.
/// - ``jump(to:settle:)``: the clock leaps (a suspend, or the wall clock set), and every
///   overdue sleeper wakes at once to the new time.
///
/// After waking sleepers, both wait (in real time, up to ``stallLimit``) until as many tasks
/// sleep on the clock as before: the woken loops have run their pass and gone back to sleep.
/// Work such a pass started without sleeping (a poll in a child task) may still run: `settle`
/// is where the test waits for it, after every step, so that it too finishes at that instant.
///
/// Setting ``time`` moves the clock and wakes the overdue sleepers without waiting for them:
/// for code that reads the time and does not sleep.
package final class ManualEnvironment: Environment, Sendable {
    private struct Sleeper {
        var deadline: Date
        var continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var time: Date
        var draw: Double
        /// By registration number: among equal deadlines, the first to sleep wakes first.
        var sleepers: [Int: Sleeper] = [:]
        var next = 0
    }
    private let state: Mutex<State>

    /// How long (real time) a step waits for the sleepers it woke to sleep again before
    /// ``Stalled`` is thrown.
    package static let stallLimit: Double = 10

    /// What a test waited for on the clock did not happen within ``stallLimit``.
    package struct Stalled: Error, CustomStringConvertible {
        var time: Date
        var what: String
        package var description: String {
            "virtual clock at \(time.timeIntervalSince1970): \(what) did not happen within \(ManualEnvironment.stallLimit) s"
        }
    }

    package init(time: Date = Date(timeIntervalSince1970: 1_800_000_000), draw: Double = 0.5) {
        state = Mutex(State(time: time, draw: draw))
    }

    package func now() -> Date { state.withLock { $0.time } }
    package func unit() -> Double { state.withLock { $0.draw } }

    /// The random draw every ``unit()`` returns.
    package var draw: Double {
        get { state.withLock { $0.draw } }
        set { state.withLock { $0.draw = newValue } }
    }

    /// The time now. Setting it wakes the sleepers it passes (in deadline order) and returns
    /// at once.
    package var time: Date {
        get { now() }
        set { wake(takeDue(upTo: newValue, leap: true)) }
    }

    /// How many tasks sleep on this clock.
    package var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a task sleeps to.
    package var nextDeadline: Date? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    package func sleep(until deadline: Date) async throws {
        try Task.checkCancellation()
        let id = state.withLock { s -> Int in
            s.next += 1
            return s.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let early: (any Error)?? = state.withLock { s in
                    if Task.isCancelled { return .some(CancellationError()) }
                    if deadline <= s.time { return .some(nil) }
                    s.sleepers[id] = Sleeper(deadline: deadline, continuation: c)
                    return .none
                }
                if case .some(let error) = early {
                    if let error { c.resume(throwing: error) } else { c.resume() }
                }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward to `date` one deadline at a time: the sleepers due at the
    /// earliest deadline wake with the clock at that deadline, the test waits for them to sleep
    /// again and for `settle`, and so on; then the clock reads `date`. Never moves it back.
    package func advance(to date: Date, settle: () async throws -> Void = {}) async throws {
        while true {
            let before = sleepers
            let due = takeDue(upTo: date, leap: false)
            if due.isEmpty { break }
            wake(due)
            try await sleeping(atLeast: before)
            try await settle()
        }
        state.withLock { $0.time = max($0.time, date) }
    }

    package func advance(by seconds: TimeInterval, settle: () async throws -> Void = {}) async throws {
        try await advance(to: now().addingTimeInterval(seconds), settle: settle)
    }

    /// The clock leaps to `date` (a suspend or a clock set; backwards too): every sleeper
    /// whose deadline it passes wakes to `date`, earliest deadline first; then the test waits
    /// for them to sleep again, and for `settle`.
    package func jump(to date: Date, settle: () async throws -> Void = {}) async throws {
        let before = sleepers
        wake(takeDue(upTo: date, leap: true))
        try await sleeping(atLeast: before)
        try await settle()
    }

    /// Waits (real time, up to ``stallLimit``) until at least `count` tasks sleep on the clock.
    package func sleeping(atLeast count: Int) async throws {
        try await settled("\(count) task(s) asleep") { sleepers >= count }
    }

    /// Waits (real time, up to ``stallLimit``) until `condition` holds: work that woken tasks
    /// started without sleeping on the clock (a poll, a write) is done.
    package func settled(_ what: String, _ condition: () async throws -> Bool) async throws {
        let limit = ContinuousClock.now + .seconds(Self.stallLimit)
        while try await !condition() {
            if ContinuousClock.now > limit { throw Stalled(time: now(), what: what) }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Removes the sleepers to wake, in wake order, and sets the clock. `leap`: all those due
    /// by `date`, the clock at `date`; otherwise those at the earliest deadline if it is due
    /// by `date`, the clock at that deadline.
    private func takeDue(upTo date: Date, leap: Bool) -> [CheckedContinuation<Void, any Error>] {
        state.withLock { s in
            let due = s.sleepers.filter { $0.value.deadline <= date }
            guard let first = due.values.map(\.deadline).min() else {
                if leap { s.time = date }
                return []
            }
            let woken = due.filter { leap || $0.value.deadline == first }
                .sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
            for (id, _) in woken { s.sleepers[id] = nil }
            s.time = leap ? date : max(s.time, first)
            return woken.map(\.value.continuation)
        }
    }

    private func wake(_ continuations: [CheckedContinuation<Void, any Error>]) {
        for c in continuations { c.resume() }
    }
}
