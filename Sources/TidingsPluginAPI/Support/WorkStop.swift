import Synchronization

/// What stops CPU-bound work whose time is up: a poll's parsing, rendering and XPath
/// evaluation run synchronously, and `withTimeout` only stops waiting for them, so they check
/// this in their loops (``WorkStop/requested``) and stop within a fraction of a second.
///
/// `withTimeout` gives its body one (``WorkStop/current``, a task-local) and trips it at the
/// deadline or when the waiting task is cancelled; work that cannot check a flag (libxml2's
/// XPath evaluation) registers an action for that moment with ``whileRunning(onStop:_:)``.
package final class WorkStop: Sendable {
    /// The stop of the timed work running in this task (nil outside `withTimeout`).
    @TaskLocal package static var current: WorkStop?

    private let flag = Atomic<Bool>(false)
    private let actions = Mutex<(stopped: Bool, next: Int, pending: [Int: @Sendable () -> Void])>((false, 0, [:]))

    package init() {}

    /// Whether this work was stopped.
    package var isStopped: Bool { flag.load(ordering: .relaxed) }

    /// Whether the work running in this task should stop: its timeout passed, or the task was cancelled.
    package static var requested: Bool { (current?.isStopped ?? false) || Task.isCancelled }

    /// Stops the work: the flag is set and the registered actions run (once, on this thread).
    package func stop() {
        flag.store(true, ordering: .relaxed)
        let run = actions.withLock { a -> [@Sendable () -> Void] in
            a.stopped = true
            defer { a.pending = [:] }
            return Array(a.pending.values)
        }
        for action in run { action() }
    }

    /// Runs `body` with `onStop` called (from the thread that stops the work) if the work is
    /// stopped before `body` returns; at once if it was stopped already.
    package func whileRunning<T, E: Error>(onStop: @escaping @Sendable () -> Void, _ body: () throws(E) -> T) throws(E) -> T {
        let id = actions.withLock { a -> Int? in
            if a.stopped { return nil }
            a.next += 1
            a.pending[a.next] = onStop
            return a.next
        }
        if id == nil { onStop() }
        defer { if let id { _ = actions.withLock { $0.pending.removeValue(forKey: id) } } }
        return try body()
    }
}
