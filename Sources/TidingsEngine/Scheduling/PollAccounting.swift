import TidingsPluginAPI

/// Whether a poll counts for its source's schedule and health.
package enum PollAccounting: Sendable {
    /// A scheduled poll, or `tidings check` with no daemon: it sets the failure count, the
    /// backoff, `error`/`recovered` events, `auth-failed` and the next due time.
    case counted
    /// A poll on request while the daemon owns the state (`tidings check` through the
    /// control socket). A success records items, events (routed as usual), validators and
    /// the time of the success; a failure records nothing and is only reported to the
    /// caller. Failure count, backoff, error/recovered events, `auth-failed` and the due
    /// time stay as the schedule left them. A server's pending Retry-After is kept: the
    /// source is not polled before it (reported as a failure).
    case uncounted
}
