import CLibnotify
import Dispatch
import FoundationEssentials
import Synchronization
import TidingsPOSIX
import TidingsPluginAPI

/// One dedicated thread that owns a GLib main context and runs it for the life of the
/// process: every libnotify/GLib call of the desktop sinks happens here, never on Swift's cooperative pool, and the signals
/// libnotify subscribes to (actions, closed) are dispatched here too.
///
/// ``perform(timeout:_:)`` waits at most `timeout`: a hung notification server (whose
/// synchronous D-Bus call blocks ~25 s) costs the caller a timeout, not a stalled pool.
final class GLibThread: @unchecked Sendable {
    enum Failure: Error, CustomStringConvertible {
        case timedOut(TimeInterval)
        case stillBusy(TimeInterval)
        /// libnotify or GLib is not installed: its soname and the Debian package to install.
        case unavailable(String)
        var description: String {
            switch self {
            case .unavailable(let why): return why
            case .timedOut(let t): return "the notification server did not answer within \(DurationParser.format(t))"
            case .stillBusy(let t): return "the notification server has not answered for \(DurationParser.format(t))"
            }
        }
    }

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var busySince: Date?
        var started = false
        /// The running job (0: none), the last one given up on while it ran, the last one made.
        var running: UInt64 = 0
        var abandoned: UInt64 = 0
        var made: UInt64 = 0
    }

    /// Nil when libnotify or GLib could not be loaded (`unavailable` says why).
    private let context: OpaquePointer?
    private let unavailable: String?
    private let name: String
    private let state = Mutex(State())

    /// The thread starts on first use: loading a config (`tidings sources`) costs no thread.
    /// libnotify and GLib are loaded here, at the first notification (DESIGN §15).
    init(name: String) {
        unavailable = tidings_notify_load().map { String(cString: $0) }
        context = unavailable == nil ? tidings_g_main_context_new() : nil
        self.name = name
    }

    private func startIfNeeded() {
        guard
            state.withLock({ s in
                defer { s.started = true }
                return !s.started
            })
        else { return }
        startDetachedThread(name: name) { [self] in self.main() }
    }

    private func main() {
        guard let context else { return }
        tidings_g_main_context_push_thread_default(context)
        while true {
            let jobs = state.withLock { s -> [@Sendable () -> Void] in
                defer { s.jobs.removeAll() }
                return s.jobs
            }
            for job in jobs {
                state.withLock { $0.busySince = Date() }
                job()
                state.withLock { s in
                    s.busySince = nil
                    s.running = 0
                }
            }
            tidings_g_main_context_iteration(context, 1)
        }
    }

    /// Runs `body` on the thread and returns its result, or throws after `timeout`. A job that
    /// has not started when its caller gives up is skipped, so it cannot show up later.
    func perform<T: Sendable>(timeout: TimeInterval, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard let context else { throw Failure.unavailable(unavailable ?? "libnotify could not be loaded") }
        // Stuck: a caller gave up on the running job, or it has run longer than this timeout.
        // (The second alone cannot tell right after a caller gave up: its job started a moment
        // after its timeout began, so it has run a little less than that timeout.)
        let busy = state.withLock { s in s.busySince.map { (since: $0, givenUp: s.running != 0 && s.abandoned == s.running) } }
        if let busy, busy.givenUp || -busy.since.timeIntervalSinceNow > timeout {
            throw Failure.stillBusy(-busy.since.timeIntervalSinceNow)
        }
        startIfNeeded()
        let resolved = Mutex(false)
        let id = state.withLock { s in
            s.made += 1
            return s.made
        }
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            @Sendable func finish(_ r: Result<T, Error>) -> Bool {
                guard
                    resolved.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return false }
                c.resume(with: r)
                return true
            }
            state.withLock { s in
                s.jobs.append { [self] in
                    guard !resolved.withLock({ $0 }) else { return }
                    state.withLock { $0.running = id }
                    _ = finish(Result { try body() })
                }
            }
            tidings_g_main_context_wakeup(context)
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                // Given up while it runs: the thread is stuck until it returns.
                if finish(.failure(Failure.timedOut(timeout))) {
                    state.withLock { s in if s.running == id { s.abandoned = id } }
                }
            }
        }
    }
}
