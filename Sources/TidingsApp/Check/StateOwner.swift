import FoundationEssentials
import Logging
import TidingsEngine
import TidingsIPC
import TidingsPluginAPI
import TidingsSQLite

/// Who works on the state for `tidings check` (DESIGN §7, §11), one of three modes:
/// - no daemon owns the state: the check polls, records and (with `--deliver`) delivers itself,
///   holding the state lock shared (``check(_:)``);
/// - daemons share a PostgreSQL state (``sharingDaemons(_:)`` is not empty): the check polls
///   now, on request (not counted for their schedule), and routes the events; they deliver;
/// - a daemon owns the state: it polls now, asked over its control socket (``daemon(pid:client:)``).
/// Either way the polls go through one ``PollLimits`` (`max_concurrent`, `max_per_host`).
package enum StateOwner {
    /// No daemon: the check works on the state itself and holds the lock shared until it
    /// exits, so a daemon that starts meanwhile waits for it. Nil: the lock file could not
    /// be opened (a read-only state), so no daemon can hold it either.
    case check(StateLock?)
    /// A daemon owns the state: the check asks it to poll, over its control socket.
    case daemon(pid: Int32?, client: ControlClient)

    /// How long a check waits for a daemon that holds the lock to answer on its socket
    /// (one that is starting binds it right after locking).
    package static let daemonPatience: Duration = .seconds(10)

    /// Finds the owner. A daemon that holds the lock but does not answer in time is an error
    /// (exit 2): working on its state beside it would take its events away.
    package static func find(stateDirectory: String, logger: Logger) async throws -> StateOwner {
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
                    throw Unreachable(description: "the daemon\(pid.map { " (PID \($0))" } ?? "") owns the state in \(stateDirectory), but: \(error)")
                }
                guard ContinuousClock.now < deadline else {
                    throw Unreachable(
                        description: "the daemon\(pid.map { " (PID \($0))" } ?? "") owns the state in \(stateDirectory) but does not answer on \(socket)")
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// A daemon owns the state but cannot be asked (exit 2: working on its state beside it
    /// would take its events away).
    package struct Unreachable: Error, CustomStringConvertible {
        package var description: String
    }

    /// Where daemons share the state (DESIGN §11): those that renewed their leases within the
    /// last 30 s (the longest lease round is 10 s). They own its schedule and its deliveries.
    package static func sharingDaemons(_ store: StateStore) throws -> [String] {
        guard store.database.isShared else { return [] }
        return try store.database.read { try LeaseBook.liveInstances($0, within: 30, now: Date()) }
    }
}
