import FoundationEssentials
import Synchronization

/// A counting semaphore for async code (bounded polls overall and per host).
package final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    package init(_ count: Int) { state = Mutex(State(available: count)) }

    package func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                if s.available > 0 {
                    s.available -= 1
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if ready { c.resume() }
        }
    }

    /// Takes a permit if one is free now, without waiting (and without queueing behind the
    /// waiters: there are none while a permit is free).
    package func tryWait() -> Bool {
        state.withLock { s in
            guard s.available > 0 else { return false }
            s.available -= 1
            return true
        }
    }

    package func signal() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty {
                s.available += 1
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }

    package func withPermit<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await wait()
        defer { signal() }
        return try await body()
    }
}
