import FoundationEssentials
import TidingsPluginAPI

/// Health: what the poll says of its source. A success clears the failures (`recovered` if an
/// `error` went out) and keeps the remote's pacing; a failure counts, and sends one `error`
/// event at `error_threshold` failures in a row (at once for rejected credentials), never one
/// per failed poll. A poll that does not count (``PollAccounting/uncounted``) leaves the
/// failures, the events and the schedule as they were.
struct HealthStage: PollStage {
    func run(_ ctx: inout PollRecording, _ db: any SQLConnection) throws {
        let (source, now) = (ctx.source, ctx.now)
        ctx.state.lastPoll = now
        switch ctx.answer {
        case .success(let result, let nextDue):
            // The remote's minimum interval: no poll before `now + minimum` (none: the old one lapses).
            let minimum = result.minimumInterval
            let paced = minimum.map { now.addingTimeInterval($0) }
            ctx.state.lastSuccess = now
            ctx.state.minInterval = minimum
            switch ctx.options.accounting {
            case .counted:
                let failures = ctx.state.failures
                if ctx.state.errorReported {
                    ctx.events.append(
                        EventFactory.health(source: source, type: .recovered, message: "recovered after \(failures) failed polls", failures: failures, now: now)
                    )
                }
                (ctx.state.failures, ctx.state.errorReported, ctx.state.authFailedHash) = (0, false, nil)
                ctx.state.nextDue = nextDue ?? ctx.state.nextDue
                ctx.state.notBefore = paced
            case .uncounted:
                ctx.state.notBefore = paced ?? ctx.state.notBefore
            }
        case .failure(let error, let notBefore, let nextDue):
            let failures = ctx.state.failures + 1
            let isAuth = error.category == .auth
            if !ctx.state.errorReported && (isAuth || failures >= source.settings.errorThreshold) {
                let what = isAuth ? "credentials rejected: \(error.message)" : "\(failures) failed polls in a row, last: \(error.message)"
                ctx.events.append(EventFactory.health(source: source, type: .error, message: what, failures: failures, now: now, auth: isAuth))
                ctx.state.errorReported = true
            }
            ctx.record.failures = failures
            (ctx.state.lastError, ctx.state.lastErrorAt, ctx.state.failures) = (error.message, now, failures)
            ctx.state.authFailedHash = isAuth ? source.configHash : nil
            ctx.state.nextDue = nextDue(failures) ?? ctx.state.nextDue
            ctx.state.notBefore = notBefore
        }
    }
}
