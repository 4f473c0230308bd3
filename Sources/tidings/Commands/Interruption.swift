import FoundationEssentials
import Glibc
import Synchronization
import TidingsApp
import TidingsEngine
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite
import UnixSignals

/// SIGINT (Ctrl-C) and SIGTERM while `tidings check` polls by itself.
///
/// Its exec plugins and sinks lead process groups of their own (``ProcessRunner``), which
/// the terminal's Ctrl-C never reaches: a check that died at once would leave them running,
/// with no timeout left to end them. So the check catches both signals while it works. The
/// first cancels the work, stops every child (SIGTERM, SIGKILL after a short grace, reaped)
/// and then ends the check by that same signal, as any interrupted command ends: a shell
/// sees 130 or 143, and stops a loop it runs the check in. A second signal ends the check
/// at once.
enum Interruption {
    static func guarding(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let caught = Mutex<Int32?>(nil)
        let work = Task { try await body() }
        let watcher = Task {
            for await signal in signals {
                let first = caught.withLock { c in
                    defer { c = c ?? signal.rawValue }
                    return c == nil
                }
                guard first else { die(of: signal.rawValue) }
                work.cancel()
            }
        }
        defer { watcher.cancel() }
        let result = await work.result
        if let signal = caught.withLock({ $0 }) {
            // Cancelled polls give up on their plugins without waiting (PollRunner's timeout):
            // here they are waited for.
            await ProcessRunner.stopAll()
            die(of: signal)
        }
        try result.get()
    }

    /// Ends the process by `signal`'s default action, as if it had not been caught.
    private static func die(of signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, signal)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
        raise(signal)
        exit(128 + signal)  // (not reached: the default action of SIGINT and SIGTERM ends the process)
    }
}
