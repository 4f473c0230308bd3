import FoundationEssentials
import Glibc
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI
import TidingsSQLite

/// The `tidings check` end of the control socket (see ``ControlProtocol``).
package final class ControlClient: Sendable {
    /// The answer to one request.
    package enum Answer: Sendable, Equatable {
        /// Events and results, in the daemon's order (without `wait` and `done`).
        case replies([ControlReply])
        /// The daemon refused the request, saying why.
        case refused(String)
        /// The daemon serves all the connections it can: ask again later (after
        /// ``ControlProtocol/busyRetry``), on a new connection.
        case busy(String)
        /// No complete answer: the daemon hung, went away or broke the protocol.
        case failed(String)
    }

    private let socket: UnixSocket

    private init(socket: UnixSocket) { self.socket = socket }

    /// Connects to the daemon at `path`. Nil when nothing listens there (yet): a daemon
    /// that is starting, or a stale socket file from one that was killed. The daemon must
    /// run as this user, as root, or as the owner of the state directory (root checking a
    /// user's daemon).
    package static func connect(path: String) throws(SystemFailure) -> ControlClient? {
        guard let socket = try UnixSocket.connect(path: path) else { return nil }
        var folder = stat()
        let owner = stat(PathText.parent(path), &folder) == 0 ? folder.st_uid : nil
        guard let peer = socket.peer(), peer.isSameUserOrRoot || peer.uid == owner else {
            throw SystemFailure(
                "\(path) is served by uid \(socket.peer().map { "\($0.uid)" } ?? "unknown"), neither this user, root nor the owner of the state")
        }
        return ControlClient(socket: socket)
    }

    /// Sends `request` and reads the answer to its end, for at most `limit` seconds (and
    /// ``ControlProtocol/clientIdle`` without a line). Runs on a thread of its own.
    package func ask(_ request: ControlRequest, limit: Double) async -> Answer {
        await withCheckedContinuation { continuation in
            let started = startDetachedThread(name: "tidings-ask") {
                continuation.resume(returning: self.exchange(request, limit: limit))
            }
            if !started {
                socket.close()
                continuation.resume(returning: .failed("cannot start a thread for the request"))
            }
        }
    }

    /// One request on this connection. A daemon that serves all it can turns the connection
    /// away, saying so, and may close it before it has read the request: a hang-up (EPIPE,
    /// ECONNRESET) before the daemon said anything is "busy" too.
    private func exchange(_ request: ControlRequest, limit: Double) -> Answer {
        defer { socket.close() }
        let deadline = ContinuousClock.now.advanced(by: .seconds(limit))
        var replies: [ControlReply] = []
        var heard = false
        do {
            let hungUp = try send(request)
            while true {
                guard let line = try socket.readLine(maxBytes: ControlProtocol.maxReplyBytes, idle: ControlProtocol.clientIdle, deadline: deadline) else {
                    if let hungUp, !heard { return .busy("the daemon hung up before it read the request (\(hungUp))") }
                    return .failed("the daemon closed the connection before the end of its answer")
                }
                heard = true
                switch try ControlReply.parse(line) {
                case nil, .waiting?: continue
                case .done?: return .replies(replies)
                case .error(let message)?: return .refused(message)
                case .busy(let message)?: return .busy(message)
                case let reply?: replies.append(reply)
                }
            }
        } catch let e as SystemFailure where e.isHangUp && !heard {
            return .busy("the daemon hung up before it answered (\(e))")
        } catch let e as SystemFailure {
            return .failed("no answer from the daemon: \(e)")
        } catch {
            return .failed("\(error)")
        }
    }

    /// Writes the request. A hang-up is returned, not thrown: what the daemon wrote before it
    /// hung up is still there to read.
    private func send(_ request: ControlRequest) throws(SystemFailure) -> SystemFailure? {
        do {
            try socket.write(line: request.line(), stall: ControlProtocol.requestTimeout)
            return nil
        } catch  where error.isHangUp {
            return error
        }
    }
}
