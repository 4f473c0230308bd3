import FoundationEssentials
import TidingsPluginAPI

/// The source's `source_state` row as the poll leaves it, written in one statement
/// (``SourceState/write(_:source:over:)``), and the health it says (``SourceHealth``).
struct SourceStateStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        try ctx.state.write(db, source: ctx.source.name, over: ctx.read)
        ctx.record.health = SourceHealth(ctx.source, ctx.state, polling: true)
    }
}
