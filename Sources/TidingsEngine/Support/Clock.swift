import FoundationEssentials
import TidingsPluginAPI

/// Wall-clock time, sleeping and randomness, injectable so scheduling can be tested exactly
/// (a test's clock moves only when the test advances it).
package protocol Environment: Sendable {
    func now() -> Date
    /// A uniform draw in [0, 1).
    func unit() -> Double
    /// Returns once this environment's clock reads `deadline` or later; at once if it already
    /// does. Throws `CancellationError` if the task is cancelled first.
    func sleep(until deadline: Date) async throws
}

extension Environment {
    /// Sleeps `seconds` on this environment's clock (none if not positive).
    package func sleep(for seconds: TimeInterval) async throws {
        try await sleep(until: now().addingTimeInterval(seconds))
    }
}

package struct SystemEnvironment: Environment {
    package init() {}
    package func now() -> Date { Date() }
    package func unit() -> Double { Double.random(in: 0..<1) }
    /// `Task.sleep` for the time left: the wall clock is read once, the wait itself is monotonic.
    package func sleep(until deadline: Date) async throws {
        let seconds = deadline.timeIntervalSince(now())
        guard seconds > 0 else { return try Task.checkCancellation() }
        try await Task.sleep(for: .seconds(seconds))
    }
}
