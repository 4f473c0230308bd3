import ArgumentParser
import Foundation
import Logging
import TidingsCore

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Poll sources once, now, and print what is new, changed or removed.",
        discussion: """
            Records what was seen, so the next check reports only later changes. The first check \
            of a source is a silent baseline (unless notify_existing = true). Exit status: 0 nothing \
            new, 1 new events, 2 a source (or with --deliver, a sink) failed.
            """)

    @OptionGroup var common: CommonOptions

    @Argument(help: "Sources to poll (default: every enabled source).", completion: ConfigCompletion.sources)
    var sources: [String] = []

    @Flag(help: "Print events as JSON lines (the event format of webhooks and exec sinks).")
    var json = false

    @Flag(help: "Also send the events to the configured sinks (through the outbox).")
    var deliver = false

    @Flag(help: "Poll and print, but record nothing (the next check sees the same changes).")
    var dryRun = false

    func run() async throws {
        let app = try App.load(common, logLevel: .notice)
        let selected = try app.selectSources(sources)
        let store = try app.openStore()
        let runner = PollRunner(store: store, http: CurlHTTPClient(maxConnectionsPerHost: app.config.maxPerHost))
        let options = RecordOptions(router: deliver ? app.router : nil, dryRun: dryRun)
        let logger = Log.logger("check")

        let outcomes = await Self.pollAll(selected, runner: runner, options: options, limit: app.config.maxConcurrent,
                                          perHost: app.config.maxPerHost, logger: logger)
        let formatter = EventFormatter(color: !json && EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO))
        var failed = false
        var any = false
        for o in outcomes {
            for e in o.record.events {
                any = true
                emit(json ? e.jsonLine() : formatter.line(e))
            }
            if let err = o.error {
                failed = true
                complain("source \(o.source) failed: \(err.message)")
            }
        }
        if deliver && !dryRun {
            let worker = OutboxWorker(store: store, sinks: Dictionary(uniqueKeysWithValues: app.config.sinks.map { ($0.name, $0.instance) }),
                                      policy: RetryPolicy(maxAge: app.config.deliveryMaxAge), logger: Log.logger("outbox"))
            for (sink, reason) in await worker.drainOnce().sorted(by: { $0.key < $1.key }) {
                failed = true
                complain("sink \(sink) failed: \(reason) (the delivery stays queued; `tidings run` retries it)")
            }
            for s in app.config.sinks { await s.instance.shutdown() }
        }
        throw ExitCode(failed ? Exit.failure : any ? Exit.newEvents : Exit.nothingNew)
    }

    /// Polls concurrently within `max_concurrent` and `max_per_host`; results in the given order.
    static func pollAll(_ sources: [SourceConfig], runner: PollRunner, options: RecordOptions, limit: Int, perHost: Int, logger: Logger) async -> [PollOutcome] {
        let global = AsyncSemaphore(limit)
        var hosts: [String: AsyncSemaphore] = [:]
        for s in sources { if let h = s.instance.host, hosts[h] == nil { hosts[h] = AsyncSemaphore(perHost) } }
        let limiters = hosts
        return await withTaskGroup(of: (Int, PollOutcome).self) { group in
            for (i, s) in sources.enumerated() {
                group.addTask {
                    let host = s.instance.host.flatMap { limiters[$0] }
                    await global.wait()
                    await host?.wait()
                    defer { host?.signal(); global.signal() }
                    return (i, await runner.poll(s, options: options, logger: logger))
                }
            }
            var out: [(Int, PollOutcome)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }
}
