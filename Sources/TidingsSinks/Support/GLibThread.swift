import CLibnotify
import Foundation
import Synchronization
import TidingsCore

/// One dedicated thread that owns a GLib main context and runs it: every libnotify/GLib call
/// of the desktop sink happens here, never on Swift's cooperative pool, and the signals
/// libnotify subscribes to (actions, closed) are dispatched here too.
///
/// ``perform(timeout:_:)`` waits at most `timeout`: a hung notification server (whose
/// synchronous D-Bus call blocks ~25 s) costs the caller a timeout, not a stalled pool.
final class GLibThread: @unchecked Sendable {
    enum Failure: Error, CustomStringConvertible {
        case timedOut(TimeInterval)
        case stillBusy(TimeInterval)
        case stopped
        var description: String {
            switch self {
            case .timedOut(let t): return "the notification server did not answer within \(DurationParser.format(t))"
            case .stillBusy(let t): return "the notification server has not answered for \(DurationParser.format(t))"
            case .stopped: return "the notification thread has stopped"
            }
        }
    }

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var busySince: Date?
        var stopping = false
        var started = false
    }

    private let context: OpaquePointer
    private let name: String
    private let state = Mutex(State())

    /// The thread starts on first use: loading a config (`tidings sources`) costs no thread.
    init(name: String) {
        context = g_main_context_new()
        self.name = name
    }

    deinit { g_main_context_unref(context) }

    private func startIfNeeded() {
        guard state.withLock({ s in defer { s.started = true }; return !s.started && !s.stopping }) else { return }
        let thread = Thread { [self] in self.main() }
        thread.name = name
        thread.start()
    }

    private func main() {
        g_main_context_push_thread_default(context)
        while true {
            let (jobs, stop) = state.withLock { s -> ([@Sendable () -> Void], Bool) in
                defer { s.jobs.removeAll() }
                return (s.jobs, s.stopping)
            }
            for job in jobs {
                state.withLock { $0.busySince = Date() }
                job()
                state.withLock { $0.busySince = nil }
            }
            if stop { break }
            g_main_context_iteration(context, 1)
        }
        g_main_context_pop_thread_default(context)
    }

    /// Runs `body` on the thread and returns its result, or throws after `timeout`. A job that
    /// has not started when its caller gives up is skipped, so it cannot show up later.
    func perform<T: Sendable>(timeout: TimeInterval, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        if let since = state.withLock({ $0.busySince }), -since.timeIntervalSinceNow > timeout {
            throw Failure.stillBusy(-since.timeIntervalSinceNow)
        }
        startIfNeeded()
        let resolved = Mutex(false)
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            @Sendable func finish(_ r: Result<T, Error>) {
                if resolved.withLock({ done in defer { done = true }; return !done }) { c.resume(with: r) }
            }
            let accepted = state.withLock { s -> Bool in
                guard !s.stopping else { return false }
                s.jobs.append {
                    guard !resolved.withLock({ $0 }) else { return }
                    finish(Result { try body() })
                }
                return true
            }
            guard accepted else { return finish(.failure(Failure.stopped)) }
            g_main_context_wakeup(context)
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { finish(.failure(Failure.timedOut(timeout))) }
        }
    }

    /// Asks the thread to finish its queued jobs and exit (it does not wait for a hung call).
    func stop() {
        state.withLock { $0.stopping = true }
        g_main_context_wakeup(context)
    }
}
