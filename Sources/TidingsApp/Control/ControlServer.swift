import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Synchronization
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI
import TidingsSQLite

/// Serves the control socket of `tidings run` (see ``ControlProtocol``).
///
/// Accepting and each connection run on dedicated threads, never on the Swift cooperative
/// pool; the request itself is answered by an async handler, bridged with a semaphore.
/// Every read and write is bounded: a peer that sends nothing, sends too much or stops
/// reading is dropped after a timeout, and the polls it asked for still finish and are
/// delivered. At most ``ControlProtocol/maxConnections`` connections are served at once.
package final class ControlServer: Sendable {
    package typealias Handler = @Sendable (ControlRequest) async -> [ControlReply]

    package let path: String
    private let listener: UnixSocket
    private let handler: Handler
    private let logger: Logger
    private let state = Mutex<(stopping: Bool, connections: Int, refusedUIDs: Set<uid_t>)>((false, 0, []))
    /// Requests that break the protocol: the first is logged, the rest until a good one at debug.
    private let badRequests = Mutex(false)

    /// Binds `path` (replacing a stale socket file: the caller holds the state lock).
    package init(path: String, logger: Logger, handler: @escaping Handler) throws(SystemFailure) {
        self.path = path
        self.listener = try UnixSocket.listen(path: path, backlog: Int32(ControlProtocol.maxConnections))
        self.handler = handler
        self.logger = logger
    }

    package func start() {
        startDetachedThread(name: "tidings-control") { self.acceptLoop() }
    }

    /// Stops accepting and removes the socket file. Connections being served finish.
    package func stop() {
        let first = state.withLock { s -> Bool in
            defer { s.stopping = true }
            return !s.stopping
        }
        if first { unlink(path) }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func acceptLoop() {
        let acceptLog = OnceLog()
        while !stopping {
            let accepted: UnixSocket?
            do {
                accepted = try listener.accept(timeout: 0.25)
            } catch {
                // Out of descriptors, say: wait instead of spinning on a ready listener.
                acceptLog.failed("accept", "control socket: \(error)", logger: logger)
                usleep(100_000)
                continue
            }
            guard let connection = accepted else { continue }
            acceptLog.succeeded("accept", "control socket: accepting again", logger: logger)
            let admitted = state.withLock { s -> Bool in
                guard s.connections < ControlProtocol.maxConnections else { return false }
                s.connections += 1
                return true
            }
            guard admitted else {
                turnAway(connection)
                continue
            }
            let started = startDetachedThread(name: "tidings-serve") {
                self.serve(connection)
                connection.close()
                self.state.withLock { $0.connections -= 1 }
            }
            if !started {
                // Out of threads: the client sees a hang-up before an answer, which it reads as busy.
                connection.close()
                state.withLock { $0.connections -= 1 }
            }
        }
        listener.close()
    }

    /// Tells a connection beyond ``ControlProtocol/maxConnections`` that the daemon is busy,
    /// and closes it. The request it sent is read first: closed with bytes unread, the socket
    /// would be reset, and a client still writing its request would get EPIPE instead of the
    /// answer. Nothing here waits (the accept loop must go on): a request still on its way is
    /// lost with the connection, and the client takes that hang-up for "busy" too.
    private func turnAway(_ connection: UnixSocket) {
        connection.discardReceived(maxBytes: ControlProtocol.maxRequestBytes)
        try? connection.write(line: ControlReply.busy("the daemon is serving \(ControlProtocol.maxConnections) connections").line(), stall: 0.1)
        connection.close()
    }

    private func serve(_ connection: UnixSocket) {
        guard let peer = connection.peer(), peer.isSameUserOrRoot else {
            refused(connection.peer())
            return
        }
        let request: ControlRequest
        do {
            let deadline = ContinuousClock.now.advanced(by: .seconds(ControlProtocol.requestTimeout))
            guard let line = try connection.readLine(maxBytes: ControlProtocol.maxRequestBytes, idle: ControlProtocol.requestTimeout, deadline: deadline) else {
                return
            }
            request = try ControlRequest.parse(line)
        } catch {
            let first = badRequests.withLock { seen in
                defer { seen = true }
                return !seen
            }
            logger.log(level: first ? .notice : .debug, "control socket: dropped a request from pid \(peer.pid): \(error)")
            try? connection.write(line: ControlReply.error("\(error)").line(), stall: 1)
            return
        }
        badRequests.withLock { $0 = false }
        logger.info(
            "control socket: pid \(peer.pid) asks to poll \(request.sources.isEmpty ? "every enabled source" : request.sources.joined(separator: ", ")) now")
        let replies = answer(request, heartbeat: { try connection.write(line: ControlReply.waiting.line(), stall: ControlProtocol.writeStall) })
        do {
            for reply in replies ?? [] { try connection.write(line: reply.line(), stall: ControlProtocol.writeStall) }
        } catch {
            logger.notice(
                "control socket: pid \(peer.pid) did not take the answer (\(error)); its polls were recorded and their events go to the sinks as usual")
        }
    }

    /// Logs a refused peer once per uid (a flood of attempts is not a flood of lines).
    private func refused(_ peer: UnixSocket.Peer?) {
        let uid = peer?.uid ?? uid_t.max
        guard state.withLock({ $0.refusedUIDs.insert(uid).inserted }) else { return }
        logger.warning("control socket: refused a connection from uid \(peer.map { "\($0.uid)" } ?? "unknown"): only the same user or root may use it")
    }

    /// Runs the handler and waits for it on this thread, sending `heartbeat` meanwhile. Nil
    /// when a heartbeat could not be sent (the client went away; the handler runs on).
    private func answer(_ request: ControlRequest, heartbeat: () throws -> Void) -> [ControlReply]? {
        let result = ReplySlot()
        let handler = self.handler
        Task {
            result.fill(await handler(request))
        }
        while true {
            if let replies = result.wait(seconds: ControlProtocol.heartbeat) { return replies }
            do { try heartbeat() } catch {
                logger.notice("control socket: the client went away (\(error)); its polls finish and are delivered as usual")
                return nil
            }
        }
    }
}

/// The handler's answer, handed from its task to the connection's thread.
private final class ReplySlot: Sendable {
    private let value = Mutex<[ControlReply]?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func fill(_ replies: [ControlReply]) {
        value.withLock { $0 = replies }
        ready.signal()
    }

    func wait(seconds: Double) -> [ControlReply]? {
        guard ready.wait(timeout: .now() + seconds) == .success else { return nil }
        return value.withLock { $0 }
    }
}
