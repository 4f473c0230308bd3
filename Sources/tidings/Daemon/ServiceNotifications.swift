import Foundation
import Logging
import Synchronization
import TidingsCore

/// What the daemon tells its service manager (DESIGN §8), through ``SystemdNotifier``:
/// `READY=1` once a configuration polls, `RELOADING=1` + `MONOTONIC_USEC` while a SIGHUP
/// reload is loaded (then `READY=1` again, also when the new config was refused and the old
/// one keeps running), `STOPPING=1` on SIGTERM/SIGINT, a `STATUS=` line, and `WATCHDOG=1`
/// from the scheduler's own loop at half of `WATCHDOG_USEC`, so a hung scheduler stops the
/// pings and systemd restarts the daemon. Outside systemd (no `NOTIFY_SOCKET`) it does nothing.
final class ServiceNotifications: Sendable {
    private let notifier: SystemdNotifier?
    private let watchdogEvery: Duration?
    private let lastPing = Mutex<ContinuousClock.Instant?>(nil)
    /// A failing send is said once, not on every watchdog tick.
    private let failed = Mutex(false)
    private let logger: Logger

    init(logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment) {
        notifier = SystemdNotifier(environment: environment)
        watchdogEvery = notifier == nil ? nil : SystemdNotifier.watchdogInterval(environment: environment)
        self.logger = logger
    }

    func ready(_ config: TidingsConfig) {
        let enabled = config.sources.filter { $0.settings.enabled }.count
        send(.ready, .status("polling \(enabled) source\(enabled == 1 ? "" : "s"), \(config.sinks.count) sink\(config.sinks.count == 1 ? "" : "s")"))
    }

    func reloading() {
        send(.reloading(monotonicMicroseconds: SystemdNotifier.monotonicMicroseconds()), .status("reloading the configuration"))
    }

    func stopping() { send(.stopping, .status("stopping: finishing in-flight work")) }

    /// Called on every pass of the scheduler loop (at least once a second); pings at the rate
    /// the service manager asked for.
    func heartbeat() {
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
            if failed.withLock({ f in defer { f = true }; return !f }) {
                logger.warning("cannot notify the service manager at \(notifier): \(error)")
            }
        }
    }
}
