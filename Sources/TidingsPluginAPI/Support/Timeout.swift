import FoundationEssentials
import Glibc
import Synchronization

/// Runs `body`, failing with `onTimeout()` once `seconds` pass, even if `body` ignores
/// cancellation (it is cancelled and left to finish in the background). `body` runs with a
/// ``WorkStop`` that is tripped then, so CPU-bound work in it (parsers) stops too.
package func withTimeout<T: Sendable>(
    _ seconds: Double, onTimeout: @escaping @Sendable () -> Error, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let once = ResumeOnce<T>()
    let work = TaskHandle()
    let stop = WorkStop()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            once.install(c)
            // The deadline is kept by the process's one timeout thread, not by a sleeping task:
            // a cancelled `Task.sleep` leaves its dispatch timer armed until the time it was
            // meant to end, so a 10,000-source daemon kept ~5,000 of them alive (31 s each)
            // and paid a task, a timer and two thread wake-ups per poll.
            let timer = TimeoutThread.shared.schedule(after: seconds) {
                if once.resume(.failure(onTimeout())) {
                    stop.stop()
                    work.cancel()
                }
            }
            work.set(
                Task {
                    let result: Result<T, Error>
                    do { result = .success(try await WorkStop.$current.withValue(stop) { try await body() }) } catch {
                        result = .failure(error)
                    }
                    TimeoutThread.shared.cancel(timer)
                    once.resume(result)
                })
        }
    } onCancel: {
        stop.stop()
        work.cancel()
        once.resume(.failure(CancellationError()))
    }
}

/// Deadlines for ``withTimeout(_:onTimeout:_:)``: one thread for the process, sleeping on a
/// monotonic-clock condition variable until the earliest deadline still wanted.
///
/// Scheduling and cancelling take a lock and never wake the thread unless the new deadline
/// is the earliest; a cancelled deadline is dropped when it reaches the top of the heap, so
/// the thread wakes about once per timeout length while every poll ends in time, and an
/// action runs on this thread only when its deadline passes.
package final class TimeoutThread: @unchecked Sendable {
    package static let shared = TimeoutThread()

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // All below under `mutex`.
    /// (deadline on CLOCK_MONOTONIC in nanoseconds, id); cancelled ids stay until they reach the top.
    private var heap = MinHeap<UInt64, UInt64>()
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 0
    private var started = false
    /// The deadline the thread sleeps until (`.max`: none).
    private var sleepingUntil = UInt64.max

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }

    /// Runs `action` on the timeout thread once `seconds` pass, unless ``cancel(_:)`` comes first.
    package func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = Self.now() &+ UInt64(max(0, min(seconds, 1e9)) * 1e9)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        nextID &+= 1
        let id = nextID
        actions[id] = action
        heap.push(deadline, id)
        if !started {
            started = true
            startDetachedThread(name: "tidings-timeout") { [self] in run() }
        } else if deadline < sleepingUntil {
            pthread_cond_signal(condition)
        }
        return id
    }

    /// The deadline is no longer wanted: its action will not run (unless it is running now).
    package func cancel(_ id: UInt64) {
        pthread_mutex_lock(mutex)
        actions[id] = nil
        pthread_mutex_unlock(mutex)
    }

    /// Deadlines scheduled and not yet run or dropped (for tests).
    package var pending: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return actions.count
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            // Drop cancelled deadlines from the top, then run or wait for the first live one.
            while let top = heap.top, actions[top.value] == nil { heap.pop() }
            guard let (deadline, id) = heap.top else {
                sleepingUntil = .max
                pthread_cond_wait(condition, mutex)
                continue
            }
            if deadline <= Self.now() {
                heap.pop()
                let action = actions.removeValue(forKey: id)
                pthread_mutex_unlock(mutex)
                action?()
                pthread_mutex_lock(mutex)
                continue
            }
            sleepingUntil = deadline
            var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            pthread_cond_timedwait(condition, mutex, &until)
        }
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
