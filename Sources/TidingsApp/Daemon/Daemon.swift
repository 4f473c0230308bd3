import FoundationEssentials
import Logging
import ServiceLifecycle
import TidingsEngine
import TidingsMonitoring
import TidingsPluginAPI

/// `tidings run`, assembled: every long-lived part of the daemon is a `Service`, and
/// ``serviceGroup(_:)`` puts them in ONE `ServiceGroup`, in the order they start. On a stop
/// (SIGTERM, SIGINT, or ``ServiceGroup/triggerGracefulShutdown()``) the group stops them in
/// reverse: the generations first (polls and deliveries in flight get `shutdown_timeout`), then
/// the status line, housekeeping, the control socket, `[http]`, and the system bus last.
package enum Daemon {
    /// What the services are made of. The command builds these (it owns the state lock, the
    /// process's HTTP client and the signals); a test builds its own.
    package struct Parts: Sendable {
        /// The generations: scheduler + outbox workers of the configuration loaded now.
        package var daemon: DaemonService
        /// `tidings.sock` in the state directory, answered by ``DaemonService/answer(_:)``.
        package var control: ControlServer
        /// `[http]` (metrics, health, the status page); already serving while the daemon waited for its state.
        package var endpoint: MonitoringEndpoint
        /// Sleep and network changes (logind, NetworkManager) for the scheduler.
        package var hostChanges: AsyncStream<HostChange>
        /// Each element asks for a reload (SIGHUP).
        package var reloads: AsyncStream<Void>
        /// How long a stop waits for the generations before the group cancels them.
        package var shutdownTimeout: TimeInterval

        package init(
            daemon: DaemonService, control: ControlServer, endpoint: MonitoringEndpoint,
            hostChanges: AsyncStream<HostChange>, reloads: AsyncStream<Void>, shutdownTimeout: TimeInterval
        ) {
            self.daemon = daemon
            self.control = control
            self.endpoint = endpoint
            self.hostChanges = hostChanges
            self.reloads = reloads
            self.shutdownTimeout = shutdownTimeout
        }
    }

    /// The daemon's services in one group, started in this order and stopped in reverse.
    package static func serviceGroup(_ parts: Parts) -> ServiceGroup {
        let daemon = parts.daemon
        let services: [any Service] = [
            LoopService("system bus") {  // sleep and network → the scheduler
                for await change in parts.hostChanges { await daemon.hostChanged(change) }
            },
            EndpointService(endpoint: parts.endpoint),  // [http]: stops after the control socket
            ControlSocketService(server: parts.control),  // `tidings check` against the daemon
            LoopService("housekeeping") { await daemon.maintenance() },  // prune history and dead letters, hourly
            LoopService("status") { await daemon.observe() },  // STATUS= line and outbox gauges
            LoopService("reload") {  // SIGHUP → a new generation
                for await _ in parts.reloads { daemon.requestReload() }
            },
            daemon,  // the generations: scheduler + outbox workers
        ]
        var configuration = ServiceGroupConfiguration(
            services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
            logger: Logger(label: "lifecycle", factory: { _ in SwiftLogNoOpLogHandler() }))
        // The generations bound their own drain by shutdown_timeout; the group waits a little longer.
        configuration.maximumGracefulShutdownDuration = .seconds(parts.shutdownTimeout + 5)
        configuration.maximumCancellationDuration = .seconds(5)
        return ServiceGroup(configuration: configuration)
    }
}

/// A background loop as a service: cancelled when the group stops, and (a loop that ends
/// early, such as a system bus that is not there) waiting for that stop rather than ending the group.
package struct LoopService: Service {
    package let name: String
    private let body: @Sendable () async -> Void

    package init(_ name: String, _ body: @escaping @Sendable () async -> Void) {
        self.name = name
        self.body = body
    }

    package func run() async throws {
        let body = self.body
        try? await cancelWhenGracefulShutdown { await body() }
        try? await gracefulShutdown()
    }
}

/// The control socket's accept thread, from the group's start until its stop.
package struct ControlSocketService: Service {
    package let server: ControlServer

    package func run() async throws {
        server.start()
        try? await gracefulShutdown()
        server.stop()
    }
}

/// `[http]`: already serving (it came up while the daemon waited for its state); closed when
/// the group stops, after the control socket.
package struct EndpointService: Service {
    package let endpoint: MonitoringEndpoint

    package func run() async throws {
        try? await gracefulShutdown()
        await endpoint.stop()
    }
}
