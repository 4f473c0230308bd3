import FoundationEssentials
import TidingsPluginAPI

/// Intake: a successful poll's items bounded, what does not fit cut with a visible marker
/// (``ItemIntake``); nothing for a failure or a 304.
struct IntakeStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard case .success(let result, _) = ctx.answer, let (items, _, _) = result.items else { return }
        ctx.intake = ItemIntake.take(items)
    }
}
