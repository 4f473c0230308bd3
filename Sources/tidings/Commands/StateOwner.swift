import ArgumentParser
import Foundation
import Logging
import TidingsPluginAPI
import TidingsEngine
import TidingsSQLite
import TidingsPOSIX
import TidingsApp

/// Who works on the state for `tidings check` (DESIGN §7).
enum StateOwner {
    /// No daemon: the check works on the state itself and holds the lock shared until it
    /// exits, so a daemon that starts meanwhile waits for it. Nil: the lock file could not
    /// be opened (a read-only state), so no daemon can hold it either.
    case check(StateLock?)
    /// A daemon owns the state: the check asks it to poll, over its control socket.
    case daemon(pid: Int32?, client: ControlClient)

    /// How long a check waits for a daemon that holds the lock to answer on its socket
    /// (one that is starting binds it right after locking).
    static let daemonPatience: Duration = .seconds(10)

    /// Finds the owner. A daemon that holds the lock but does not answer in time is an error
    /// (exit 2): working on its state beside it would take its events away.
    static func find(stateDirectory: String, logger: Logger) async throws -> StateOwner {
        let socket = ControlProtocol.socketPath(in: stateDirectory)
        let deadline = ContinuousClock.now.advanced(by: daemonPatience)
        while true {
            let share: StateLock.Share
            do {
                share = try StateLock.share(directory: stateDirectory)
            } catch {
                logger.debug("working on the state without its lock: \(error)")
                return .check(nil)
            }
            switch share {
            case .shared(let lock):
                return .check(lock)
            case .heldByDaemon(let pid):
                do {
                    if let client = try ControlClient.connect(path: socket) { return .daemon(pid: pid, client: client) }
                } catch {
                    complain("the daemon\(pid.map { " (PID \($0))" } ?? "") owns the state in \(stateDirectory), but: \(error)")
                    throw ExitCode(Exit.failure)
                }
                guard ContinuousClock.now < deadline else {
                    complain("the daemon\(pid.map { " (PID \($0))" } ?? "") owns the state in \(stateDirectory) but does not answer on \(socket)")
                    throw ExitCode(Exit.failure)
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}
