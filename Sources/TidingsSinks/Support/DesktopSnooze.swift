import Dispatch
import FoundationEssentials
import Logging
import TidingsPOSIX
import TidingsPluginAPI

/// What the desktop's "Snooze 1h" action does: a silence of that item (`source=S key=K`) for
/// an hour, made in the state as `tidings silence add` would (DESIGN §10).
struct DesktopSnooze: Sendable {
    let writer: any SilenceWriter
    let logger: Logger
    /// The button's label: "Snooze 1h".
    static let label = "Snooze \(DurationParser.format(Silence.snoozeDuration))"

    /// Called on the GLib thread when the user clicks; the write happens off it, so a busy
    /// state database cannot stall other notifications.
    func snooze(_ matchers: [SilenceMatcher]) {
        let (writer, logger) = (writer, logger)
        let what = matchers.map(\.description).joined(separator: " ")
        DispatchQueue.global().async {
            let now = Date()
            do {
                let s = try writer.addSilence(
                    matchers: matchers, comment: Silence.snoozeComment, now: now,
                    until: now.addingTimeInterval(Silence.snoozeDuration))
                logger.notice("snoozed \(what) for \(DurationParser.format(Silence.snoozeDuration)) from the desktop (silence \(s.id))")
            } catch {
                logger.error("could not snooze \(what) from the desktop: \(error)")
            }
        }
    }
}
