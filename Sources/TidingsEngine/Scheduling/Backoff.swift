import FoundationEssentials
import Glibc
import TidingsPluginAPI

/// Wait-time arithmetic (DESIGN §6). Pure: randomness is passed in, so tests pin it.
package enum Backoff {
    /// `base × U(1 - jitter, 1 + jitter)`, with `unit` ∈ [0, 1) as the uniform draw.
    package static func jittered(_ base: TimeInterval, jitter: Double, unit: Double) -> TimeInterval {
        base * (1 - jitter + 2 * jitter * unit)
    }

    /// Wait after a successful poll: the interval, jittered.
    package static func afterSuccess(interval: TimeInterval, jitter: Double, unit: Double) -> TimeInterval {
        jittered(interval, jitter: jitter, unit: unit)
    }

    /// Wait after failure number `failures` (1 = first) in a row: `min(interval × 2^k, maxBackoff)`,
    /// jittered; never sooner than the server's `Retry-After`.
    package static func afterFailure(
        interval: TimeInterval, failures: Int, maxBackoff: TimeInterval, jitter: Double, unit: Double,
        retryAfter: TimeInterval? = nil
    ) -> TimeInterval {
        let exp = min(Double(max(failures, 0)), 40)
        let base = min(interval * pow(2, exp), maxBackoff)
        let wait = jittered(base, jitter: jitter, unit: unit)
        return max(wait, retryAfter ?? 0)
    }

    /// Where to put sources that are due at start (or overdue after a suspend or clock jump):
    /// spread over a window that grows with their number, never beyond one interval.
    package static func spreadWindow(count: Int, interval: TimeInterval) -> TimeInterval {
        min(interval, max(2, Double(count) * 0.01))
    }
}

/// Retry timing for outbox deliveries: first retry within seconds, doubling, capped.
package struct RetryPolicy: Sendable, Equatable {
    package var first: TimeInterval = 2
    package var cap: TimeInterval = 600
    package var jitter: Double = 0.2
    /// Give up (dead letter) after this long since the delivery was queued.
    package var maxAge: TimeInterval = 86_400

    package init(first: TimeInterval = 2, cap: TimeInterval = 600, jitter: Double = 0.2, maxAge: TimeInterval = 86_400) {
        self.first = first
        self.cap = cap
        self.jitter = jitter
        self.maxAge = maxAge
    }

    /// Wait before attempt `attempts + 1`, given `attempts` failures so far (≥ 1).
    package func delay(afterAttempts attempts: Int, unit: Double, retryAfter: TimeInterval? = nil) -> TimeInterval {
        let base = min(first * pow(2, Double(min(max(attempts - 1, 0), 40))), cap)
        return max(Backoff.jittered(base, jitter: jitter, unit: unit), retryAfter ?? 0)
    }
}
