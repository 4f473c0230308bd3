import FoundationEssentials
import Logging
import Synchronization
import TidingsEngine
import TidingsMonitoring
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// What the daemon tells its service manager (DESIGN §8), through ``SystemdNotifier``:
/// `READY=1` once a configuration polls, `RELOADING=1` + `MONOTONIC_USEC` while a SIGHUP
/// reload is loaded (then `READY=1` again, also when the new config was refused and the old
/// one keeps running), `STOPPING=1` on SIGTERM/SIGINT, a `STATUS=` line (``DaemonStatus``:
/// sources, failing, outbox backlog, sent again when it changes), and `WATCHDOG=1`
/// from the scheduler's own loop at half of `WATCHDOG_USEC`, so a hung scheduler stops the
/// pings and systemd restarts the daemon. Outside systemd (no `NOTIFY_SOCKET`) it sends nothing.
///
/// The same transitions are the daemon's ``Readiness``, which `GET /-/ready` reports.
package final class ServiceNotifications: Sendable {
    private let notifier: SystemdNotifier?
    private let watchdogEvery: Duration?
    private let lastPing = Mutex<ContinuousClock.Instant?>(nil)
    /// A failing send is said once, not on every watchdog tick.
    private let failed = Mutex(false)
    private let logger: Logger
    private struct Phase {
        var readiness = Readiness.starting
        /// The `STATUS=` text sent last, so an unchanged status is not sent again.
        var status: String?
    }
    private let phase = Mutex(Phase())

    package init(logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment) {
        notifier = SystemdNotifier(environment: environment)
        watchdogEvery = notifier == nil ? nil : SystemdNotifier.watchdogInterval(environment: environment)
        self.logger = logger
    }

    package var readiness: Readiness { phase.withLock { $0.readiness } }

    /// A configuration polls, on an open state. (Once stopping, the daemon stays stopping.)
    package func ready(_ status: DaemonStatus) {
        let ready = phase.withLock { p in
            guard p.readiness != .stopping else { return false }
            p = Phase(readiness: .ready, status: status.description)
            return true
        }
        if ready { send(.ready, .status(status.description)) }
    }

    /// The status line again, if it changed and the daemon is ready (not while it reloads or stops).
    package func update(_ status: DaemonStatus) {
        let text = status.description
        let changed = phase.withLock { p in
            guard p.readiness == .ready, p.status != text else { return false }
            p.status = text
            return true
        }
        if changed { send(.status(text)) }
    }

    package func reloading() {
        phase.withLock { $0.readiness = .reloading }
        send(.reloading(monotonicMicroseconds: SystemdNotifier.monotonicMicroseconds()), .status("reloading the configuration"))
    }

    package func stopping() {
        phase.withLock { $0.readiness = .stopping }
        send(.stopping, .status("stopping: finishing in-flight work"))
    }

    /// Called on every pass of the scheduler loop (at least once a second); pings at the rate
    /// the service manager asked for.
    package func heartbeat() {
        guard let every = watchdogEvery else { return }
        let now = ContinuousClock.now
        let due = lastPing.withLock { last -> Bool in
            guard last.map({ now - $0 >= every }) ?? true else { return false }
            last = now
            return true
        }
        if due { send(.watchdog) }
    }

    private func send(_ messages: SystemdNotifyMessage...) {
        guard let notifier else { return }
        do {
            try notifier.send(messages)
        } catch {
            if failed.withLock({ f in
                defer { f = true }
                return !f
            }) {
                logger.warning("cannot notify the service manager at \(notifier): \(error)")
            }
        }
    }
}
