import FoundationEssentials
import TidingsPluginAPI

/// Silence: an event an active silence matches is kept from the sinks (recorded in history
/// with the silence's id, counted on the silence).
struct SilenceStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard !ctx.events.isEmpty else { return }
        let silences = try SilenceStore.active(db, at: ctx.now)
        guard !silences.isEmpty else { return }
        for e in ctx.events {
            guard let silence = silences.first(where: { $0.matches(e) }) else { continue }
            try SilenceStore.countSilenced(db, id: silence.id)
            ctx.record.silenced[e.id] = silence.id
        }
    }
}
