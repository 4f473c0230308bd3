import FoundationEssentials
import TidingsPluginAPI

/// Events: the event of each change (``EventFactory``), or over `max_events` one summary
/// instead of the flood (the state is recorded in full, so the next poll is normal).
struct EventsStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard let changes = ctx.dedupe?.changes else { return }
        if changes.count <= ctx.source.settings.maxEvents {
            ctx.events = changes.map { ctx.event($0) }
        } else {
            let summary = EventFactory.summary(source: ctx.source, changes: changes, now: ctx.now)
            ctx.events = [summary]
            ctx.summarized = true
            ctx.record.warnings.append("\(summary.title); recorded the state and sent one summary event instead")
        }
    }
}
