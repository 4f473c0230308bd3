import Synchronization

/// A counting semaphore for async code (bounded polls overall and per host).
public final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    public init(_ count: Int) { state = Mutex(State(available: count)) }

    public func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                if s.available > 0 { s.available -= 1; return true }
                s.waiters.append(c)
                return false
            }
            if ready { c.resume() }
        }
    }

    public func signal() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty { s.available += 1; return nil }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }

    public func withPermit<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await wait()
        defer { signal() }
        return try await body()
    }
}

/// Wakes a sleeping loop early (new work arrived) or lets it sleep to a deadline.
public final class Wakeup: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init() {}

    public func signal() {
        let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.pending = true
            return nil
        }
        c?.resume()
    }

    /// Returns after `seconds`, on ``signal()``, or on cancellation, whichever is first.
    public func wait(seconds: Double) async {
        if state.withLock({ s -> Bool in defer { s.pending = false }; return s.pending }) { return }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .seconds(max(0, seconds)))
            self?.signal()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.pending { s.pending = false; return true }
                    s.waiter = c
                    return false
                }
                if resumeNow { c.resume() }
            }
        } onCancel: {
            self.signal()
        }
        timer.cancel()
        state.withLock { $0.pending = false }
    }
}
