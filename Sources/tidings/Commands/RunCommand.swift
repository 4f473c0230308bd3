import ArgumentParser
import FoundationEssentials
import Glibc
import Logging
import ServiceLifecycle
import TidingsApp
import TidingsEngine
import TidingsIPC
import TidingsMonitoring
import TidingsPluginAPI
import TidingsSQLite
import TidingsSystemBus
import UnixSignals

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the daemon in the foreground: poll on schedule and deliver events to sinks.",
        discussion: """
            Meant for systemd (or a terminal). SIGTERM/SIGINT: stop polling, finish in-flight \
            deliveries, exit 0. SIGHUP: reload the configuration; an invalid one is reported and \
            the running one is kept. Changed intervals apply on reload and on restart: a stored \
            next poll the new settings could not have set is rescheduled within the new wait \
            (a server's Retry-After still holds).

            One state, one owner: the daemon locks its state directory (tidings.lock, with its \
            PID). A second `tidings run` on the same state exits 2 at once, naming the first; \
            one started while a `tidings check` works on the state waits for it. The daemon \
            serves tidings.sock in the state directory, through which `tidings check` asks it \
            to poll now.
            """)

    @OptionGroup var common: CommonOptions

    /// How long a starting daemon waits for `tidings check` runs that work on the state.
    static let checkPatience: Duration = .seconds(300)

    /// The daemon's loader, for its start and its reloads: sources it does not hold are kept as
    /// recipes where the state is a shared PostgreSQL (``ConfigLoader/recipesWhereShared``).
    static var daemonLoader: ConfigLoader {
        var loader = App.loader
        loader.recipesWhereShared = true
        return loader
    }

    func run() async throws {
        // Fewer malloc arenas (before any thread allocates much): less freed memory left behind
        // in arenas of their own by the load's workers (``FreeMemory/limitArenas()``).
        FreeMemory.limitArenas()
        // Trap the stop and reload signals before anything else: their default actions would
        // kill the process. A stop before the daemon runs ends it cleanly at its next step.
        let stops = await StopSignals()
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // Where daemons share a PostgreSQL state, sources this one does not hold are kept as recipes.
        let app = try App.load(common, logLevel: .info, recipes: true)
        let logger = Log.logger("tidings")
        // An unsafe state directory is refused before the lock file and the socket go into it.
        do { try StateDirectory.prepare(app.stateDir) } catch {
            complain("\(error)")
            throw ExitCode(Exit.failure)
        }
        // [http] comes up as soon as the daemon has to wait for the state (so /-/ready says 503
        // meanwhile), else once it owns it; not at all when another daemon owns it.
        let notifications = ServiceNotifications(logger: logger)
        // The scheduler's passes and the polls overrunning their timeout: /-/healthy is 503 while
        // a polling daemon's scheduler loop stalls; `tidings status` reads them from tidings.pulse.
        let pulse = PulseKeeper()
        let endpoint = MonitoringEndpoint(
            readiness: { notifications.readiness },
            unhealthy: { notifications.readiness == .ready ? pulse.pulse().stall(now: Date()) : nil }, logger: Log.logger("http"))
        let serve = {
            do { try await endpoint.apply(app.config.http) } catch {
                complain("\(error)")
                throw ExitCode(Exit.failure)
            }
        }
        guard !stops.requested,
            let lock = try await Self.claimState(app.stateDir, logger: logger, stopped: { stops.requested }, whileWaiting: serve)
        else {
            await endpoint.stop()
            logger.info("stopped before starting")
            return
        }
        try await serve()
        // Held until after the socket is gone: a daemon that takes over must find its own.
        defer { withExtendedLifetime(lock) {} }
        let store = try app.openStore(writable: true)
        logger.info("tidings \(TidingsVersion.string) starting: config \(app.configFile), state \(store.path)")
        do {
            let again = try NoticeBook.redeliverUnseen(store, router: app.router)
            if !again.isEmpty { logger.notice("delivering \(again.count) pending notice\(again.count == 1 ? "" : "s") again (not seen since created)") }
        } catch {
            logger.error("could not queue pending notices again (state database \(store.path)): \(error)")
        }
        // Sleep and network (logind, NetworkManager); without a system bus, polling as scheduled.
        let (host, hostChanges) = await SystemBusWatcher(logger: Log.logger("system-bus")).start()
        let daemon = DaemonService(
            initial: app.config, configFile: app.configFile, loader: Self.daemonLoader, http: App.http,
            limitConnectionsPerHost: { App.http.limitConnectionsPerHost($0) }, store: store,
            host: host, notifications: notifications, endpoint: endpoint, logger: logger, pulse: pulse, pulseDirectory: app.stateDir)
        // The status page reads this state and polls through the daemon, as `tidings check` does.
        endpoint.pages.attach(
            StatusPages.Backend(
                config: { daemon.currentConfig() }, store: store, pid: getpid(), startedAt: Date(),
                pollNow: { await daemon.answer(ControlRequest(sources: $0)) }, outboxChanged: { daemon.nudgeOutbox() },
                pulse: { pulse.pulse() }))
        let control: ControlServer
        do {
            control = try ControlServer(path: ControlProtocol.socketPath(in: app.stateDir), logger: Log.logger("control")) { request in
                await daemon.answer(request)
            }
        } catch {
            await endpoint.stop()
            complain("cannot serve the control socket: \(error)")
            throw ExitCode(Exit.failure)
        }
        let group = Daemon.serviceGroup(
            Daemon.Parts(
                daemon: daemon, control: control, endpoint: endpoint, hostChanges: hostChanges,
                reloads: AsyncStream { continuation in
                    let forward = Task {
                        for await _ in hangups { continuation.yield() }
                        continuation.finish()
                    }
                    continuation.onTermination = { _ in forward.cancel() }
                },
                shutdownTimeout: app.config.shutdownTimeout))
        // SIGTERM/SIGINT (trapped since the start) stop the group; one that came already stops it at once.
        await stops.attach(group)
        try await group.run()
        logger.info("stopped")
    }

    /// Takes the state lock for the daemon's life: waits for checks that work on the state
    /// (running `whileWaiting` once, when it starts to wait); exits 2 at once if another daemon
    /// holds it. Nil when `stopped` says a stop came while it waited.
    static func claimState(
        _ stateDir: String, logger: Logger, stopped: () -> Bool = { false },
        whileWaiting: () async throws -> Void = {}
    ) async throws -> StateLock? {
        let deadline = ContinuousClock.now.advanced(by: checkPatience)
        var told = false
        while true {
            let claim: StateLock.Claim
            do {
                claim = try StateLock.claim(directory: stateDir)
            } catch {
                complain("\(error)")
                throw ExitCode(Exit.failure)
            }
            switch claim {
            case .owned(let lock):
                if told { logger.notice("the state is free: starting") }
                return lock
            case .heldByDaemon(let pid):
                let holder = await confirmedDaemon(pid, stateDir: stateDir)
                complain(
                    "the state in \(stateDir) is in use by another `tidings run`\(holder.map { " (PID \($0))" } ?? ""): one state has one daemon (two would deliver everything twice)"
                )
                throw ExitCode(Exit.failure)
            case .heldByChecks:
                guard ContinuousClock.now < deadline else {
                    complain("the state in \(stateDir) stayed in use by `tidings check` for \(checkPatience); try again")
                    throw ExitCode(Exit.failure)
                }
                if !told {
                    logger.notice("waiting for `tidings check` to finish with the state in \(stateDir)")
                    try await whileWaiting()
                }
                told = true
                try await Task.sleep(for: .milliseconds(100))
                if stopped() { return nil }
            }
        }
    }

    /// The PID in the lock file, once the daemon holding it has written it (right after locking).
    private static func confirmedDaemon(_ pid: Int32?, stateDir: String) async -> Int32? {
        var pid = pid
        var tries = 0
        while tries < 10, pid.map({ kill($0, 0) != 0 && errno == ESRCH }) ?? true {
            tries += 1
            try? await Task.sleep(for: .milliseconds(50))
            guard case .heldByDaemon(let again)? = try? StateLock.share(directory: stateDir) else { return pid }
            pid = again
        }
        return pid
    }
}
