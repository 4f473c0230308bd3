import FoundationEssentials
import TidingsPluginAPI

/// Reminders: `repeat_interval` reminders of items still present (``Reminders``), for a poll
/// that routes, is kept and counts for the schedule (``RecordOptions/remindsOfItems``).
struct ReminderStage: PollStage {
    let router: Router

    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard case .success = ctx.answer else { return }
        let reminders = try Reminders.batch(db, source: ctx.source, router: router, now: ctx.now)
        ctx.events += reminders.events
        ctx.through = reminders.through
        if let warning = reminders.warning { ctx.record.warnings.append(warning) }
    }
}
