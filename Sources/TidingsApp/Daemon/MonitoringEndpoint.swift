import Logging
import TidingsEngine
import TidingsMonitoring
import TidingsPOSIX
import TidingsPluginAPI
import TidingsSQLite

/// `[http]` for the daemon's life (DESIGN §8). Started with the configuration, before the state
/// is open, so `/-/ready` answers 503 while the daemon waits for it; applied again on each
/// reload: an unchanged `listen` keeps serving untouched, a changed one moves (an address that
/// cannot be served is reported and the old one kept), a removed `[http]` stops; stopped last.
package actor MonitoringEndpoint {
    private var server: MonitoringServer?
    private let routes: MonitoringRoutes
    /// The status page (`status_page = true`); its settings follow each ``apply(_:)``.
    package nonisolated let pages = StatusPages()
    private let logger: Logger

    /// `unhealthy`: why `/-/healthy` answers 503 now (nil: healthy).
    package init(readiness: @escaping @Sendable () -> Readiness, unhealthy: @escaping @Sendable () -> String? = { nil }, logger: Logger) {
        self.routes = MonitoringRoutes(readiness: readiness, unhealthy: unhealthy)
        self.logger = logger
    }

    /// Serves `settings` (nil: nothing). Throws when a new address cannot be served; whatever
    /// served before goes on.
    package func apply(_ settings: HTTPSettings?) async throws {
        guard settings?.listen != server?.address else {
            // status_page and [http.auth] apply at once, also when `listen` stays.
            pages.configure(settings)
            return
        }
        guard let address = settings?.listen else {
            await server?.stop()
            pages.configure(nil)
            if let old = server?.address { logger.notice("[http] removed: no longer serving on \(old)") }
            server = nil
            return
        }
        // Once per process: metrics are recorded from here on, also if [http] goes and comes back.
        PrometheusExporter.bootstrap()
        let started = try await MonitoringServer.start(address, routes: routes, pages: pages, logger: logger)
        pages.configure(settings)
        if let old = server {
            await old.stop()
            logger.notice("[http] moved from \(old.address) to \(address)")
        }
        server = started
        logger.info("serving /metrics, /-/healthy and /-/ready\(settings?.statusPage == true ? " and the status page" : "") on http://\(address)")
    }

    package func stop() async {
        await server?.stop()
        server = nil
    }
}
