import Foundation
import Logging
import ServiceLifecycle
import TidingsCore
import UnixSignals

/// The daemon: one generation (scheduler + outbox worker) per loaded configuration.
///
/// SIGHUP loads the config anew; if it is valid the current generation drains and a new one
/// starts on the same state, otherwise the error is logged and the old one keeps running.
/// Graceful shutdown stops polling and waits (bounded) for in-flight work.
final class DaemonService: Service, Sendable {
    enum Control: Sendable { case reload, shutdown }

    private let initial: TidingsConfig
    private let configFile: String
    private let store: StateStore
    private let hangups: UnixSignalsSequence
    private let logger: Logger

    init(initial: TidingsConfig, configFile: String, store: StateStore, hangups: UnixSignalsSequence, logger: Logger) {
        self.initial = initial
        self.configFile = configFile
        self.store = store
        self.hangups = hangups
        self.logger = logger
    }

    func run() async throws {
        let (controls, feed) = AsyncStream<Control>.makeStream()
        try await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { outer in
                outer.addTask {
                    for await _ in self.hangups { feed.yield(.reload) }
                }
                outer.addTask { await self.maintenance() }
                var config = initial
                var iterator = controls.makeAsyncIterator()
                while let fresh = await runGeneration(config, next: { await iterator.next() ?? .shutdown }) {
                    config = fresh
                }
                outer.cancelAll()
            }
        } onGracefulShutdown: {
            feed.yield(.shutdown)
        }
    }

    /// Loads the config again; nil (after logging why) if it is invalid.
    private func loadFresh() -> TidingsConfig? {
        do {
            let fresh = try App.loader.load(file: configFile)
            for w in fresh.warnings { logger.warning("\(w)") }
            logger.notice("reloaded configuration: \(fresh.sources.count) sources, \(fresh.sinks.count) sinks")
            return fresh
        } catch let e as ConfigErrors {
            for err in e.errors { logger.error("reload failed, keeping the running configuration: \(err.description)") }
        } catch {
            logger.error("reload failed, keeping the running configuration: \(error)")
        }
        return nil
    }

    /// Runs scheduler and outbox for one config until shutdown (returns nil) or a reload with
    /// a valid config (returns it). On a reload with an invalid config this generation keeps running.
    private func runGeneration(_ config: TidingsConfig, next: () async -> Control) async -> TidingsConfig? {
        let sinks = Dictionary(uniqueKeysWithValues: config.sinks.map { ($0.name, $0.instance) })
        let outbox = OutboxWorker(store: store, sinks: sinks, policy: RetryPolicy(maxAge: config.deliveryMaxAge), logger: Log.logger("outbox"))
        let runner = PollRunner(store: store, http: CurlHTTPClient(maxConnectionsPerHost: config.maxPerHost))
        let router = Router(routes: config.routes, allSinks: config.sinks.map(\.name))
        let scheduler = Scheduler(config: config, runner: runner, router: router, logger: Log.logger("scheduler"), onEvents: { outbox.nudge() })

        let fresh: TidingsConfig? = await withTaskGroup(of: Bool.self) { group in
            group.addTask { await scheduler.run(); return true }
            group.addTask { await outbox.run(); return true }
            var fresh: TidingsConfig? = nil
            // Load before tearing anything down: a bad config must not stop the running one.
            while fresh == nil, await next() == .reload {
                fresh = loadFresh()
            }
            await scheduler.stop()
            outbox.stop()
            let timeout = config.shutdownTimeout
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return false
            }
            var finished = 0
            while let done = await group.next() {
                if done {
                    finished += 1
                    if finished == 2 { break }
                } else {
                    logger.warning("in-flight work did not finish within \(DurationParser.format(timeout)); it stays queued and resumes on next start")
                    break
                }
            }
            group.cancelAll()
            return fresh
        }
        for s in config.sinks { await s.instance.shutdown() }
        return fresh
    }

    /// Hourly housekeeping: prune old history.
    private func maintenance() async {
        while !Task.isCancelled {
            do {
                let r = try store.prune(olderThanDays: initial.historyDays)
                if r.events + r.items > 0 { logger.info("pruned \(r.events) old events and \(r.items) gone items") }
            } catch {
                logger.error("pruning failed: \(error)")
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}
