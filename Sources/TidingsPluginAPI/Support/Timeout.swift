import Synchronization

/// Runs `body`, failing with `onTimeout()` once `seconds` pass, even if `body` ignores
/// cancellation (it is cancelled and left to finish in the background).
package func withTimeout<T: Sendable>(
    _ seconds: Double, onTimeout: @escaping @Sendable () -> Error, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let once = ResumeOnce<T>()
    let work = TaskHandle()
    // Cancelled as soon as the body finishes: a timer left sleeping for the whole timeout
    // after every poll kept thousands of tasks and dispatch timers alive in the daemon.
    let timer = TaskHandle()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            once.install(c)
            work.set(
                Task {
                    let result: Result<T, Error>
                    do { result = .success(try await body()) } catch { result = .failure(error) }
                    if once.resume(result) { timer.cancel() }
                })
            timer.set(
                Task {
                    do { try await Task.sleep(for: .seconds(seconds)) } catch { return }
                    if once.resume(.failure(onTimeout())) { work.cancel() }
                })
        }
    } onCancel: {
        work.cancel()
        timer.cancel()
        once.resume(.failure(CancellationError()))
    }
}

/// Resumes a continuation exactly once, from whichever side gets there first.
final class ResumeOnce<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T, Error>?, early: Result<T, Error>?, done: Bool)>((nil, nil, false))

    func install(_ c: CheckedContinuation<T, Error>) {
        let early = state.withLock { s -> Result<T, Error>? in
            if let e = s.early {
                s.early = nil
                return e
            }
            s.continuation = c
            return nil
        }
        if let early { c.resume(with: early) }
    }

    /// Returns true if this call was the one that resumed.
    @discardableResult
    func resume(_ result: Result<T, Error>) -> Bool {
        let c = state.withLock { s -> CheckedContinuation<T, Error>?? in
            if s.done { return .none }
            s.done = true
            if let c = s.continuation {
                s.continuation = nil
                return .some(c)
            }
            s.early = result
            return .some(nil)
        }
        switch c {
        case .none: return false
        case .some(let cont):
            cont?.resume(with: result)
            return true
        }
    }
}

/// A task to cancel from elsewhere (the timed body, or its timer); a cancel that comes
/// before the task is set cancels it when it is set.
final class TaskHandle: Sendable {
    private let state = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))
    func set(_ t: Task<Void, Never>) {
        let cancelNow = state.withLock { s -> Bool in
            s.task = t
            return s.cancelled
        }
        if cancelNow { t.cancel() }
    }
    func cancel() {
        let t = state.withLock { s -> Task<Void, Never>? in
            s.cancelled = true
            return s.task
        }
        t?.cancel()
    }
}
