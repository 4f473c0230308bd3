import ArgumentParser
import Foundation
import TidingsCore

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Work with the configuration.",
        subcommands: [Check.self])

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Validate the configuration and plugins.d; errors print as FILE:LINE: message (exit 78).",
            discussion: """
                Reports every error found, not only the first, and warns about what would silently do \
                nothing (no sink configured). With --poll, each enabled source (or each one named) is \
                also polled once, with a timeout of at most 10s and nothing recorded, to catch what only \
                a response shows: a wrong URL or credential, or an http-json 'key' that matches none of \
                the items. Exit status: 0 valid, 2 a sample poll failed, 78 configuration error.
                """)

        @OptionGroup var common: CommonOptions

        @Flag(help: "Also poll each enabled source once (records nothing).")
        var poll = false

        @Argument(help: "With --poll: the sources to poll (default: every enabled source).", completion: ConfigCompletion.sources)
        var sources: [String] = []

        func validate() throws {
            if !sources.isEmpty && !poll { throw ValidationError("source names are for --poll") }
        }

        func run() async throws {
            let app = try App.load(common, logLevel: .warning)
            let c = app.config
            let enabled = c.sources.filter { $0.settings.enabled }.count
            emit("\(app.configFile): OK: \(c.sources.count) source\(c.sources.count == 1 ? "" : "s") (\(enabled) enabled), \(c.sinks.count) sink\(c.sinks.count == 1 ? "" : "s"), \(c.routes.count) route\(c.routes.count == 1 ? "" : "s"); plugins from \(c.pluginsDir)")
            guard poll else { return }
            let selected = try app.selectSources(sources)
            let http = CurlHTTPClient(maxConnectionsPerHost: c.maxPerHost)
            var failed = false
            for (source, outcome) in zip(selected, await SamplePoll.run(selected, http: http, limit: c.maxConcurrent)) {
                switch outcome {
                case .items(let n): emit("source \(source.name): polled, \(n) item\(n == 1 ? "" : "s")")
                case .notModified: emit("source \(source.name): polled, not modified")
                case .failed(let error):
                    failed = true
                    complain("source \(source.name): sample poll failed: \(error.message)")
                }
            }
            if failed { throw ExitCode(Exit.failure) }
        }
    }
}

/// `config check --poll`: one poll of each source, without the state (nothing is read or
/// recorded, no validators are sent). Findings a provider logs while polling (an http-json
/// `key` that matches no item) appear on stderr.
enum SamplePoll {
    /// A sample poll waits at most this long, whatever the source's `timeout`.
    static let timeoutCap: TimeInterval = 10

    enum Outcome {
        case items(Int)
        case notModified
        case failed(PollError)
    }

    /// Polls concurrently, at most `limit` at a time; outcomes in the order of `sources`.
    static func run(_ sources: [SourceConfig], http: any HTTPClient, limit: Int) async -> [Outcome] {
        let slots = AsyncSemaphore(limit)
        return await withTaskGroup(of: (Int, Outcome).self) { group in
            for (i, s) in sources.enumerated() {
                group.addTask { await slots.withPermit { (i, await poll(s, http: http)) } }
            }
            var out: [(Int, Outcome)] = []
            for await r in group { out.append(r) }
            return out.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    static func poll(_ source: SourceConfig, http: any HTTPClient) async -> Outcome {
        let timeout = min(source.settings.timeout, timeoutCap)
        var logger = Log.logger("config")
        logger[metadataKey: "source"] = "\(source.name)"
        let context = PollContext(source: source.name, http: http, timeout: timeout, maxBody: source.settings.maxBody, logger: logger)
        let provider = source.instance
        do {
            let result = try await withTimeout(timeout + 1, onTimeout: {
                PollError(.transient, "timed out after \(DurationParser.format(timeout))")
            }) {
                try await provider.prepare(context)
                return try await provider.poll(context)
            }
            switch result {
            case .snapshot(let items, _): return .items(items.count)
            case .notModified: return .notModified
            }
        } catch let e as PollError {
            return .failed(e)
        } catch {
            return .failed(PollError(.transient, "\(error)"))
        }
    }
}
