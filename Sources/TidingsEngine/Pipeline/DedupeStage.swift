import FoundationEssentials
import TidingsPluginAPI

/// Dedupe: the items against the stored ones (``Deduplicator``): new, changed, removed, the
/// silent baseline, flaps; the item rows written, the validators and the baseline kept for the
/// source's row.
struct DedupeStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        guard let intake = ctx.intake, case .success(let result, _) = ctx.answer, let (_, validators, renumbered) = result.items else { return }
        let source = ctx.source
        let complete = source.instance.snapshotIsComplete
        ctx.previous = try PollRecorder.items(db, source: source.name, includingGone: !complete)
        let baseline = ctx.state.baselineAt == nil || renumbered
        let outcome = Deduplicator(flapWindow: source.flapWindow, reportsRemovals: complete)
            .run(previous: ctx.previous, current: intake.items, baseline: baseline, notifyExisting: source.settings.notifyExisting, now: ctx.now)
        try PollRecorder.write(db, source: source.name, upserts: outcome.upserts)
        try Reminders.forget(db, source: source.name, upserts: outcome.upserts)
        if baseline { ctx.record.baselineCount = outcome.baselineCount }
        if let cut = PollRecorder.cutWarning(intake, stored: outcome.upserts) { ctx.record.warnings.append(cut) }
        ctx.dedupe = outcome
        ctx.state.etag = validators.etag
        ctx.state.lastModified = validators.lastModified
        ctx.state.baselineAt = ctx.state.baselineAt ?? ctx.now
    }
}
