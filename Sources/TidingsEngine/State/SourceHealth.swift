import FoundationEssentials
import TidingsPluginAPI

/// What the state stores about a source's health (``SourceState``, ``SourceStatus``,
/// ``StoredHealth``): all ``SourceHealth`` is derived from.
package protocol StoredHealthFields {
    /// Failed polls in a row (0: the last counted poll succeeded).
    var failures: Int { get }
    var lastSuccess: Date? { get }
    /// The configuration hash under which the credentials were rejected.
    var authFailedHash: String? { get }
}

/// A source's health, derived in this one place from what the state stores and the source's
/// configuration: `tidings sources` and `tidings status`, the status page, the daemon's status
/// line and the `tidings_source_up` gauge, the scheduler and the poll runner (an auth-failed
/// source is not polled until its configuration changes) all ask it.
package enum SourceHealth: String, CaseIterable, Sendable {
    /// The last counted poll succeeded.
    case ok
    /// Never polled successfully, and no failure either (the state has no row, or only a schedule).
    case new
    /// The last counted polls failed (``SourceState/failures`` of them).
    case failing
    /// The credentials were rejected under the configuration as it is: not polled until it changes.
    case authFailed = "auth-failed"
    /// Disabled in the configuration (`tidings sources` says `disabled`).
    case paused

    /// Of `source`, as stored (`stored`: nil before its first poll). `polling`: the health its
    /// polls have, whether or not it is enabled (`tidings check` polls a disabled source too).
    package init(_ source: SourceConfig, _ stored: (any StoredHealthFields)?, polling: Bool = false) {
        if !source.settings.enabled && !polling {
            self = .paused
        } else if let stored, stored.authFailedHash == source.configHash {
            self = .authFailed
        } else if (stored?.failures ?? 0) > 0 {
            self = .failing
        } else if stored?.lastSuccess == nil {
            self = .new
        } else {
            self = .ok
        }
    }

    /// A problem: `tidings status` lists it, the status line counts it as failing, the status
    /// page marks it, and `tidings_source_up` is 0.
    package var isFailing: Bool { self == .failing || self == .authFailed }
}

extension SourceState: StoredHealthFields {}
extension SourceStatus: StoredHealthFields {}
