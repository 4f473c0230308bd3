import FoundationEssentials
import TidingsPluginAPI

/// Route: where each event that no silence holds goes (``Router``): the first matching rule
/// (and those after a `continue`), each sink's delivery sent at once or held for quiet hours
/// or `group_wait`.
struct RouteStage: PollStage {
    let router: Router

    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        for e in ctx.events where ctx.record.silenced[e.id] == nil {
            ctx.decisions[e.id] = router.decisions(for: e, at: ctx.now, through: ctx.through[e.id])
        }
    }
}
