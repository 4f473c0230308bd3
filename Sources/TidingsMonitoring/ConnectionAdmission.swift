import NIOCore
import Synchronization

/// Who the `[http]` endpoint serves when many connections are open (issue 30 item 10): the
/// health checks are answered ahead of everything else, whatever holds the other places.
///
/// - At most ``MonitoringServer/maxConnections`` requests other than health checks are served
///   at once; up to ``MonitoringServer/maxWaitingRequests`` more wait for a place (in order),
///   further ones get 503 at once.
/// - `/-/healthy` and `/-/ready` never wait for such a place: at most
///   ``MonitoringServer/maxProbes`` of them at once (each takes microseconds), further ones 503.
/// - A connection with no request being served (a request head still arriving, a kept-alive
///   connection between requests, one that never sends a byte) is idle: beyond
///   ``MonitoringServer/maxIdleConnections`` of them the one idle longest is closed. So idle
///   connections never fill the listener's accept bound: a new connection, such as a probe's,
///   is always taken in and read.
package final class ConnectionAdmission: Sendable {
    private let maxServing: Int
    private let maxWaiting: Int
    private let maxProbes: Int
    private let maxIdle: Int

    private struct State {
        /// Idle connections, the one idle longest first.
        var idle: [(id: ObjectIdentifier, channel: any Channel)] = []
        var serving = 0
        var probes = 0
        var waiting: [(id: ObjectIdentifier, turn: CheckedContinuation<Bool, Never>)] = []
    }
    private let state = Mutex(State())

    package init(maxServing: Int, maxWaiting: Int, maxProbes: Int, maxIdle: Int) {
        self.maxServing = maxServing
        self.maxWaiting = maxWaiting
        self.maxProbes = maxProbes
        self.maxIdle = maxIdle
    }

    /// A new connection: idle until its first request; forgotten when it closes.
    package func opened(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        channel.closeFuture.whenComplete { _ in self.closed(id) }
        becameIdle(id, channel)
    }

    /// A request on `channel` may be served now (true), after waiting its turn (true), or not
    /// at all (false: answer 503). Each true is followed by one ``end(_:probe:)``.
    package func begin(_ channel: any Channel, probe: Bool) async -> Bool {
        let id = ObjectIdentifier(channel)
        // One look under the lock decides: in now, refused, or queued (no place can come free
        // between the look and the queueing).
        return await withTaskCancellationHandler {
            await withCheckedContinuation { turn in
                let now: Bool? = state.withLock { s in
                    s.idle.removeAll { $0.id == id }
                    if probe {
                        guard s.probes < maxProbes else { return false }
                        s.probes += 1
                        return true
                    }
                    if s.serving < maxServing {
                        s.serving += 1
                        return true
                    }
                    // Cancelled before it queued, or the connection closed meanwhile: refused.
                    guard s.waiting.count < maxWaiting, !Task.isCancelled, channel.isActive else { return false }
                    s.waiting.append((id, turn))
                    return nil
                }
                if let now { turn.resume(returning: now) }
            }
        } onCancel: {
            self.leave(id)
        }
    }

    /// The request that ``begin(_:probe:)`` let in was answered: its place goes to the next
    /// waiting request; the connection is idle again.
    package func end(_ channel: any Channel, probe: Bool) {
        let next: CheckedContinuation<Bool, Never>? = state.withLock { s in
            if probe {
                s.probes -= 1
                return nil
            }
            guard !s.waiting.isEmpty else {
                s.serving -= 1
                return nil
            }
            return s.waiting.removeFirst().turn
        }
        next?.resume(returning: true)
        if channel.isActive { becameIdle(ObjectIdentifier(channel), channel) }
    }

    /// How many connections are idle, requests served and waiting (for tests).
    package var counts: (idle: Int, serving: Int, waiting: Int, probes: Int) {
        state.withLock { ($0.idle.count, $0.serving, $0.waiting.count, $0.probes) }
    }

    private func becameIdle(_ id: ObjectIdentifier, _ channel: any Channel) {
        let evicted: (any Channel)? = state.withLock { s in
            s.idle.removeAll { $0.id == id }
            s.idle.append((id, channel))
            return s.idle.count > maxIdle ? s.idle.removeFirst().channel : nil
        }
        evicted?.close(promise: nil)
    }

    private func closed(_ id: ObjectIdentifier) {
        state.withLock { s in s.idle.removeAll { $0.id == id } }
        leave(id)
    }

    /// A waiting request whose connection closed or whose task was cancelled: refused.
    private func leave(_ id: ObjectIdentifier) {
        let gone: [CheckedContinuation<Bool, Never>] = state.withLock { s in
            let mine = s.waiting.filter { $0.id == id }.map(\.turn)
            s.waiting.removeAll { $0.id == id }
            return mine
        }
        gone.forEach { $0.resume(returning: false) }
    }
}
