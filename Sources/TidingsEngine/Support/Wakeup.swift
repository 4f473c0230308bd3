import FoundationEssentials
import Synchronization
import TidingsPluginAPI

/// Wakes a sleeping loop early (new work arrived) or lets it sleep to a deadline on its
/// environment's clock (a test's virtual clock wakes it when the test advances time).
package final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The sleep that ends the wait in progress: cancelled by the signal that ends it
        /// first, so no timer outlives its wait (nor lingers on a virtual clock).
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(State())
    private let env: any Environment

    package init(env: any Environment = SystemEnvironment()) { self.env = env }

    package func signal() {
        let (c, timer) = state.withLock { s -> (CheckedContinuation<Void, Never>?, Task<Void, Never>?) in
            if let w = s.waiter {
                let timer = s.timer
                s.waiter = nil
                s.timer = nil
                return (w, timer)
            }
            s.pending = true
            return (nil, nil)
        }
        timer?.cancel()
        c?.resume()
    }

    /// Returns after `seconds` on the environment's clock, on ``signal()``, or on
    /// cancellation, whichever is first.
    package func wait(seconds: Double) async {
        await wait(until: env.now().addingTimeInterval(max(0, seconds)))
    }

    /// Returns once the environment's clock reads `deadline`, on ``signal()``, or on
    /// cancellation, whichever is first.
    package func wait(until deadline: Date) async {
        if state.withLock({ s -> Bool in
            defer { s.pending = false }
            return s.pending
        }) {
            return
        }
        let env = self.env
        let timer = Task { [weak self] in
            do { try await env.sleep(until: deadline) } catch { return }  // cancelled: the wait is over
            self?.signal()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.pending {
                        s.pending = false
                        return true
                    }
                    s.waiter = c
                    s.timer = timer
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
