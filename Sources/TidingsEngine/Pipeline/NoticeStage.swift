import FoundationEssentials
import TidingsPluginAPI

/// Notices: items of kind `notice` kept pending until dismissed or expired (``NoticeBook``),
/// also when a summary stood in for their events.
struct NoticeStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard let changes = ctx.dedupe?.changes else { return }
        let ttl = ctx.source.settings.noticeTTL
        if ctx.summarized {
            let notices = changes.filter { $0.item.kind == NoticeBook.kind }
            try NoticeBook.record(db, source: ctx.source.name, changes: notices, events: notices.map { ctx.event($0) }, ttl: ttl, now: ctx.now)
        } else {
            try NoticeBook.record(db, source: ctx.source.name, changes: changes, events: ctx.events, ttl: ttl, now: ctx.now)
        }
    }
}
