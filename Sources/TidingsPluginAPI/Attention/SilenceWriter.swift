import FoundationEssentials
import Synchronization

/// Makes silences from inside the daemon: the desktop sink's "Snooze 1h" action. Sinks get one
/// through ``SinkSetup/silences``.
package protocol SilenceWriter: Sendable {
    /// Adds a silence from `now` until `end`, made by this process's user; returns it.
    func addSilence(matchers: [SilenceMatcher], comment: String, now: Date, until end: Date) throws -> Silence
}
