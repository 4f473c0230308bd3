import ServiceLifecycle
import Synchronization
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite
import UnixSignals

/// SIGTERM and SIGINT for the daemon's whole life, trapped before anything is logged or opened.
///
/// The `ServiceGroup` would trap them itself, but only once it runs: a stop that came while the
/// daemon loaded its configuration, waited for the state or opened it ended the process by the
/// signal's default action (killed by signal 15, not a clean exit 0). Here a stop that comes
/// before the group runs is remembered: the daemon checks ``requested`` at each step of its
/// start and ends cleanly, and a group attached later is stopped at once.
package final class StopSignals: Sendable {
    private enum State {
        case waiting
        case requested
        case attached(ServiceGroup)
    }

    /// Shared with the listening task (a `Mutex` cannot be captured by itself).
    private final class Shared: Sendable {
        let state = Mutex(State.waiting)
    }

    private let shared = Shared()
    private let listener: Task<Void, Never>

    /// Traps SIGTERM and SIGINT from now on.
    package init() async {
        let signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let shared = self.shared
        listener = Task {
            for await _ in signals {
                let group: ServiceGroup? = shared.state.withLock { state in
                    switch state {
                    case .waiting, .requested:
                        state = .requested
                        return nil
                    case .attached(let group):
                        return group
                    }
                }
                await group?.triggerGracefulShutdown()
            }
        }
    }

    deinit { listener.cancel() }

    /// A stop came (before the group was attached).
    package var requested: Bool {
        shared.state.withLock { if case .requested = $0 { return true } else { return false } }
    }

    /// From now on a stop goes to `group`; one that already came stops it as soon as it runs.
    package func attach(_ group: ServiceGroup) async {
        let early = shared.state.withLock { state -> Bool in
            defer { state = .attached(group) }
            if case .requested = state { return true } else { return false }
        }
        if early { await group.triggerGracefulShutdown() }
    }
}
