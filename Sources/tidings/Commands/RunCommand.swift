import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TidingsCore
import UnixSignals

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the daemon in the foreground: poll on schedule and deliver events to sinks.",
        discussion: """
            Meant for systemd (or a terminal). SIGTERM/SIGINT: stop polling, finish in-flight \
            deliveries, exit 0. SIGHUP: reload the configuration; an invalid one is reported and \
            the running one is kept.
            """)

    @OptionGroup var common: CommonOptions

    func run() async throws {
        // Trap SIGHUP before anything else: its default action would kill the process.
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        let app = try App.load(common, logLevel: .info)
        let store = try app.openStore(writable: true)
        let logger = Log.logger("tidings")
        logger.info("tidings \(TidingsVersion.string) starting: config \(app.configFile), state \(store.path)")
        let again = (try? NoticeBook.redeliverUnseen(store, router: app.router)) ?? []
        if !again.isEmpty { logger.notice("delivering \(again.count) pending notice\(again.count == 1 ? "" : "s") again (not seen since created)") }
        let daemon = DaemonService(
            initial: app.config, configFile: app.configFile, store: store, hangups: hangups, logger: logger)
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: daemon)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: Logger(label: "lifecycle", factory: { _ in SwiftLogNoOpLogHandler() })))
        try await group.run()
        logger.info("stopped")
    }
}
