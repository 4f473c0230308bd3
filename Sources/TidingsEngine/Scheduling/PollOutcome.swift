import FoundationEssentials
import TidingsPluginAPI

/// How polling one source once went (``PollRunner``).
package enum PollOutcome: Sendable {
    /// The provider answered; the poll is recorded. `next`: when the schedule polls it again,
    /// stored with the poll; nil for a poll that does not count (on request: the schedule stays).
    case succeeded(PollRecord, next: Date?)
    /// The provider failed; the failure is counted and recorded (`record.failures` in a row, an
    /// `error` event at the threshold); `next`, its backoff, stored with it.
    case failed(PollError, PollRecord, next: Date)
    /// The provider said the credentials are rejected; recorded, with the `error` event: the
    /// source is not polled again until its configuration changes.
    case authFailed(PollError, PollRecord)
    /// Not polled: the credentials were rejected earlier under this configuration.
    case skipped(PollError)
    /// No request made: the remote's minimum interval since a poll on request (e.g. a
    /// `tidings check` through the daemon) is not over; the schedule polls it at `until`.
    case deferred(until: Date)
    /// It failed and nothing was recorded: a poll on request (not counted), one the server's
    /// Retry-After or minimum interval refuses, one cut short (stopping, the host paused), or
    /// the state could not be read or written. `retry`: when the schedule polls it again (nil:
    /// the schedule stays as it is).
    case unrecorded(PollError, retry: Date?)
    /// Where daemons share the state: the source's lease lapsed mid-poll, nothing was recorded;
    /// the schedule tries again at `retry` if this instance still holds it then.
    case notOwned(PollError, retry: Date)

    /// Why it failed; nil for a success or a deferral.
    package var error: PollError? {
        switch self {
        case .succeeded, .deferred: return nil
        case .failed(let e, _, _), .authFailed(let e, _), .skipped(let e), .unrecorded(let e, _), .notOwned(let e, _): return e
        }
    }

    /// What the poll recorded: its events, warnings, silenced events (empty when it recorded nothing).
    package var record: PollRecord {
        switch self {
        case .succeeded(let r, _), .failed(_, let r, _), .authFailed(_, let r): return r
        case .skipped, .deferred, .unrecorded, .notOwned: return PollRecord()
        }
    }

    /// When the schedule polls the source again, and whether that time still has to be stored
    /// (the poll's own transaction stored it otherwise, or it must not be: a lease lost). Nil:
    /// not on schedule (a poll on request leaves the schedule alone; rejected credentials wait
    /// for a configuration change).
    package var next: (due: Date, store: Bool)? {
        switch self {
        case .succeeded(_, let next): return next.map { ($0, false) }
        case .failed(_, _, let next): return (next, false)
        case .authFailed, .skipped: return nil
        case .deferred(let until): return (until, true)
        case .unrecorded(_, let retry): return retry.map { ($0, true) }
        case .notOwned(_, let retry): return (retry, false)
        }
    }
}
