import FoundationEssentials
import Logging
import Synchronization
import TidingsPluginAPI

/// Polls one source: prepare (once), poll with a deadline, record the result, and compute
/// when to poll next. Shared by `tidings check` and the daemon's scheduler.
package final class PollRunner: Sendable {
    package let store: StateStore
    package let recorder: PollRecorder
    package let http: any HTTPClient
    package let env: any Environment
    private let prepared = Mutex<Set<String>>([])
    /// Sources whose last poll in this process failed, with the failure count: the first
    /// failure of an outage is logged as a warning, the rest at debug, the recovery once.
    private let failing = Mutex<[String: Int]>([:])
    /// Failed writes to the state database (disk full, read-only): one error line per outage.
    private let stateLog = OnceLog()
    /// Poll bodies running, and which of them run past their timeout (the daemon's are
    /// shared by its generations, for its health).
    package let overruns: PollOverruns

    package init(store: StateStore, http: any HTTPClient, env: any Environment = SystemEnvironment(), overruns: PollOverruns = PollOverruns()) {
        self.store = store
        self.recorder = PollRecorder(store: store)
        self.http = http
        self.env = env
        self.overruns = overruns
    }

    /// Forget which sources were prepared (after a reload, credentials are checked again).
    package func resetPrepared() { prepared.withLock { $0.removeAll() } }

    /// `known`: the rows read for many polls at once (``SourceStates``); nil, this poll reads its own.
    package func poll(_ source: SourceConfig, options: RecordOptions, logger: Logger, known: SourceStates? = nil) async -> PollOutcome {
        var log = logger
        log[metadataKey: "source"] = "\(source.name)"
        let settings = source.settings
        // The poll's one read of its source's row (or the row in `known`, read with others):
        // whether credentials were rejected, the validators to send, the remote's pacing; the
        // recording writes over it. If it fails, the poll fails: polling blind could retry
        // rejected credentials, and a state error must reach the exit status of `check`, not
        // only the log.
        let state: SourceState?
        do {
            let name = source.name
            if let known {
                state = known.state(of: name)
            } else {
                state = try await store.database.read { try SourceState.read($0, source: name) }
            }
        } catch {
            let err = PollError(.transient, "could not read the state database \(store.path): \(error)")
            if !options.callerReportsFailures { stateFailed(err.message, logger: log) }
            return .unrecorded(err, retry: env.now().addingTimeInterval(min(settings.interval, 60)))
        }
        if SourceHealth(source, state, polling: true) == .authFailed {
            return .skipped(
                PollError(.auth, "credentials were rejected earlier; fix the configuration (a changed config or `tidings state forget \(source.name)` retries)")
            )
        }
        /// The remote's minimum interval between polls, stored by the last successful poll.
        let paced = state?.minInterval
        // A poll on request keeps the server's Retry-After too (the schedule always does),
        // and so does a one-shot check its minimum interval between polls.
        if let notBefore = state?.notBefore, notBefore > env.now() {
            if options.accounting == .counted, !options.callerReportsFailures {
                // A scheduled poll: a poll on request since then started the remote's interval
                // anew, or received a Retry-After (a counted failure's backoff already waits it out).
                return .deferred(until: notBefore)
            }
            if options.accounting == .uncounted || (options.callerReportsFailures && paced != nil) {
                let why =
                    paced.map { "the server allows one poll every \(DurationParser.format($0)) at most (its minimum interval)" }
                    ?? "the server asked for no request before \(Timestamp.format(notBefore)) (Retry-After)"
                return .unrecorded(PollError(.rateLimited, "\(why); not polling it before \(Timestamp.format(notBefore))"), retry: nil)
            }
        }
        let validators = Validators(etag: state?.etag, lastModified: state?.lastModified)
        let context = PollContext(
            source: source.name, http: http, validators: validators, timeout: settings.timeout,
            maxBody: settings.maxBody, logger: log, now: env.now(), privateRedirects: settings.privateRedirects)
        let result: Result<PollResult, PollError>
        do {
            let provider = source.instance
            let needsPrepare = !prepared.withLock { $0.contains(source.name) }
            let overruns = self.overruns
            // The body is overrunning from the moment the timeout below gives up on it until it returns.
            let running = overruns.begin(source.name, deadline: env.now().addingTimeInterval(settings.timeout + 1))
            let value = try await withTimeout(
                settings.timeout + 1,
                onTimeout: {
                    PollError(.transient, "timed out after \(DurationParser.format(settings.timeout))")
                }
            ) {
                defer { overruns.end(running) }
                if needsPrepare { try await provider.prepare(context) }
                return try await provider.poll(context)
            }
            if needsPrepare { _ = prepared.withLock { $0.insert(source.name) } }
            result = .success(value)
        } catch let e as PollError {
            result = .failure(e)
        } catch is CancellationError {
            // Shutting down: this poll did not happen; record nothing and let the next run poll.
            return .unrecorded(PollError(.transient, "cancelled"), retry: env.now())
        } catch {
            result = .failure(PollError(.transient, "\(error)"))
        }

        let now = env.now()
        if case .failure(let error) = result, options.accounting == .counted, let pause = options.host?.current.pause {
            // The host went offline or to sleep while this poll ran: not the source's fault.
            // Nothing is recorded; the source is due again and polled once polls resume.
            log.info("poll failed while polls are paused (\(pause.rawValue)): \(error.message); not counted, polled again when they resume")
            return .unrecorded(error, retry: now)
        }
        do {
            switch (result, options.accounting) {
            case (.failure(let error), .uncounted):
                if error.category == .auth { prepared.withLock { _ = $0.remove(source.name) } }
                // Not counted, but the server's pacing is kept as a scheduled poll keeps it: no
                // request before its Retry-After (or its minimum interval), on request or on schedule.
                if let floor = [error.retryAfter, paced].compactMap({ $0 }).max() {
                    let until = max(now.addingTimeInterval(floor), state?.notBefore ?? now)
                    try await recorder.setNotBefore(source.name, provider: source.provider, at: until)
                }
                if !options.callerReportsFailures {
                    log.notice("poll on request failed: \(error.message) (not counted: failures, backoff and next poll unchanged)")
                }
                return .unrecorded(error, retry: nil)
            case (.success(let value), .uncounted):
                let record = try await recorder.record(source, .success(value, nextDue: nil), now: now, options: options, prior: .read(state))
                stateSucceeded(logger: log)
                logBaseline(record, source: source, logger: log)
                return .succeeded(record, next: nil)
            case (.success(let value), .counted):
                // Never sooner than the remote's own minimum interval, whatever the configured one.
                let wait = Backoff.afterSuccess(interval: settings.interval, jitter: settings.jitter, unit: env.unit())
                let next = now.addingTimeInterval(max(wait, value.minimumInterval ?? 0))
                let record = try await recorder.record(source, .success(value, nextDue: next), now: now, options: options, prior: .read(state))
                stateSucceeded(logger: log)
                for warning in record.warnings { log.warning("\(warning)") }
                if let n = failing.withLock({ $0.removeValue(forKey: source.name) }) {
                    log.notice("poll succeeded again after \(n) failed poll\(n == 1 ? "" : "s")")
                }
                logBaseline(record, source: source, logger: log)
                return .succeeded(record, next: next)
            case (.failure(let error), .counted):
                let unit = env.unit()
                // A failed poll keeps the remote's minimum interval as a floor, like a Retry-After.
                let floor = [error.retryAfter, paced].compactMap { $0 }.max()
                let wait: @Sendable (Int) -> TimeInterval = { failures in
                    Backoff.afterFailure(
                        interval: settings.interval, failures: failures, maxBackoff: settings.maxBackoff,
                        jitter: settings.jitter, unit: unit, retryAfter: floor)
                }
                let isAuth = error.category == .auth
                let notBefore = floor.map { now.addingTimeInterval($0) }
                let nextDue: @Sendable (Int) -> Date? = { failures in isAuth ? .distantFuture : now.addingTimeInterval(wait(failures)) }
                let record = try await recorder.record(
                    source, .failure(error, notBefore: notBefore, nextDue: nextDue), now: now, options: options,
                    prior: .read(state))
                stateSucceeded(logger: log)
                if isAuth {
                    prepared.withLock { _ = $0.remove(source.name) }
                    let reported = logFailure(
                        error, "credentials rejected: \(error.message); not polling again until the configuration changes",
                        level: .error, orExplain: "credentials rejected: not polled again until the configuration changes", options: options, logger: log)
                    return .authFailed(reported, record)
                }
                let delay = wait(record.failures)
                let first = failing.withLock { $0.updateValue(record.failures, forKey: source.name) == nil }
                let reported = logFailure(
                    error, "poll failed (\(record.failures) in a row): \(error.message); next try in \(DurationParser.format(delay))",
                    level: first ? .warning : .debug,
                    orExplain: error.retryAfter.map { "the server asked for no request for \(DurationParser.format($0)) (Retry-After)" },
                    options: options, logger: log)
                return .failed(reported, record, next: now.addingTimeInterval(delay))
            }
        } catch let lost as LeaseLost {
            // The lease lapsed mid-poll (another instance may own the source now): nothing was
            // recorded. The source stays scheduled: if this instance still holds (or renews) the
            // lease it polls it again in an interval; if not, the scheduler drops it then.
            log.info("\(lost)")
            return .notOwned(PollError(.transient, lost.description), retry: now.addingTimeInterval(settings.interval))
        } catch {
            // The state could not be written: nothing was recorded, so nothing is lost; try again later.
            let err = PollError(.transient, "could not record the poll in the state database \(store.path): \(error)")
            if !options.callerReportsFailures { stateFailed(err.message, logger: log) }
            return .unrecorded(err, retry: now.addingTimeInterval(min(settings.interval, 60)))
        }
    }

    /// Logs a counted failure as `line`; or, when the caller reports failures itself, logs
    /// nothing and returns the error with `consequence` (what the state now holds for later
    /// polls) after its message: the one line the caller prints then says it all.
    private func logFailure(
        _ error: PollError, _ line: String, level: Logger.Level, orExplain consequence: String?,
        options: RecordOptions, logger: Logger
    ) -> PollError {
        guard options.callerReportsFailures else {
            logger.log(level: level, "\(line)")
            return error
        }
        var explained = error
        if let consequence { explained.message += "; \(consequence)" }
        return explained
    }

    private func logBaseline(_ record: PollRecord, source: SourceConfig, logger: Logger) {
        guard let n = record.baselineCount else { return }
        if source.settings.notifyExisting {
            logger.notice("first poll: reporting \(record.events.count) existing item\(record.events.count == 1 ? "" : "s") (notify_existing = true)")
        } else {
            logger.notice("baseline: stored \(n) existing item\(n == 1 ? "" : "s") silently (notify_existing = false)")
        }
    }

    /// A read or write of the state database failed: an error the first time, then debug
    /// until a write succeeds again.
    package func stateFailed(_ message: String, logger: Logger) {
        stateLog.failed("state", message, logger: logger)
    }

    private func stateSucceeded(logger: Logger) {
        stateLog.succeeded("state", "state database \(store.path) is writable again", logger: logger)
    }
}
