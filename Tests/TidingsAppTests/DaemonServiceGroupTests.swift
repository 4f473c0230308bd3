import Foundation
import Logging
import ServiceLifecycle
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsMonitoring
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The daemon in-process, as `tidings run` assembles it (``Daemon/serviceGroup(_:)``): one
/// ServiceGroup of the generations, the control socket, `[http]`, housekeeping, the status line,
/// the system bus feed and reloads; the real control socket in a scratch state directory, the
/// real SQLite state. Only the provider and the sink are the test's.
final class DaemonServiceGroupTests: XCTestCase {
    /// The items every `scripted` source returns; shared by the sources a config makes.
    final class Script: @unchecked Sendable {
        let lock = NSLock()
        var items: [Item] = []
        var polls = 0
        var delivered: [String] = []
        var shutdowns = 0
    }

    struct ScriptedSource: Provider {
        let script: Script
        func poll(_ ctx: PollContext) async throws -> PollResult {
            script.lock.withLock {
                script.polls += 1
                return .snapshot(script.items)
            }
        }
    }

    struct RecordingSink: Sink {
        let script: Script
        func deliver(_ events: [Event]) async throws {
            script.lock.withLock { script.delivered += events.map(\.key) }
        }
        func shutdown() async { script.lock.withLock { script.shutdowns += 1 } }
    }

    var dir = ""
    let script = Script()
    var group: ServiceGroup!
    var daemon: DaemonService!
    var running: Task<Void, Error>!
    var reload: AsyncStream<Void>.Continuation!

    var loader: ConfigLoader {
        let script = self.script
        return ConfigLoader(
            providers: ProviderRegistry([ProviderFactory(name: "scripted", summary: "test") { _, _, _ in ScriptedSource(script: script) }]),
            sinks: SinkRegistry([SinkFactory(type: "recording", summary: "test") { _, _ in RecordingSink(script: script) }]),
            http: testHTTP, mail: testHTTP)
    }

    func writeConfig(sources: [String], interval: String = "1h") throws {
        var text = "state_dir = \"\(dir)/state\"\nshutdown_timeout = \"5s\"\n\n[sinks.inbox]\ntype = \"recording\"\n"
        for s in sources { text += "\n[sources.\(s)]\nprovider = \"scripted\"\ninterval = \"\(interval)\"\n" }
        try write(text, to: "\(dir)/tidings.toml")
        try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
    }

    /// Starts the daemon's group on the config written last.
    func start() throws {
        let config = try loader.load(file: "\(dir)/tidings.toml")
        let stateDir = "\(dir)/state"
        let store = try StateStore.open(directory: stateDir, logger: Logger(label: "test"))
        let notifications = ServiceNotifications(logger: Logger(label: "test"), environment: [:])
        let endpoint = MonitoringEndpoint(readiness: { notifications.readiness }, logger: Logger(label: "test"))
        let daemon = DaemonService(
            initial: config, configFile: config.file, loader: loader, http: testHTTP, limitConnectionsPerHost: { _ in },
            store: store, host: HostConditions(), notifications: notifications, endpoint: endpoint, logger: Logger(label: "test"))
        let control = try ControlServer(path: ControlProtocol.socketPath(in: stateDir), logger: Logger(label: "test")) { await daemon.answer($0) }
        let (reloads, reload) = AsyncStream<Void>.makeStream()
        let (hostChanges, _) = AsyncStream<HostChange>.makeStream()
        group = Daemon.serviceGroup(
            Daemon.Parts(
                daemon: daemon, control: control, endpoint: endpoint, hostChanges: hostChanges, reloads: reloads,
                shutdownTimeout: config.shutdownTimeout))
        self.daemon = daemon
        self.reload = reload
        let group = self.group!
        running = Task { try await group.run() }
    }

    override func setUpWithError() throws {
        dir = try scratchDirectory()
    }

    override func tearDown() async throws {
        if let group, let running {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
        }
    }

    /// Asks the daemon over its socket, as `tidings check` does.
    func answer(_ sources: [String]) async throws -> ControlClient.Answer {
        let socket = ControlProtocol.socketPath(in: "\(dir)/state")
        for _ in 0..<100 {
            if let client = try ControlClient.connect(path: socket) {
                return await client.ask(ControlRequest(sources: sources), limit: 20)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return .failed("the control socket never answered")
    }

    func ask(_ sources: [String]) async throws -> [ControlReply] {
        let answer = try await answer(sources)
        guard case .replies(let replies) = answer else {
            XCTFail("no answer from the daemon: \(answer)")
            return []
        }
        return replies
    }

    func until(_ what: String, seconds: Double = 10, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(seconds))
        while !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func testACheckAgainstTheDaemonPollsThroughItAndTheOutboxDelivers() async throws {
        try writeConfig(sources: ["news"])
        script.items = [Item(key: "a", kind: "k", title: "A")]
        try start()
        let first = try await ask(["news"])
        XCTAssertEqual(first, [.result(source: "news", outcome: .ok)], "the first poll is the silent baseline")
        script.lock.withLock { script.items.append(Item(key: "b", kind: "k", title: "B")) }
        let second = try await ask(["news"])
        XCTAssertEqual(second.compactMap { if case .event(let e, _) = $0 { return e.key } else { return nil } }, ["b"])
        XCTAssertEqual(second.last, .result(source: "news", outcome: .ok))
        // The poll's event went to the outbox; the daemon's worker delivers it.
        try await until("the delivery") { script.lock.withLock { script.delivered == ["b"] } }
        let unknown = try await answer(["nope"])
        guard case .refused(let message) = unknown else { return XCTFail("\(unknown)") }
        XCTAssertTrue(message.contains("no source named 'nope'"), message)
    }

    func testAReloadSwapsTheGenerationAndAnInvalidOneKeepsTheRunningConfiguration() async throws {
        try writeConfig(sources: ["one"])
        try start()
        _ = try await ask(["one"])
        XCTAssertEqual(daemon.currentConfig().sources.map(\.name), ["one"])

        try writeConfig(sources: ["one", "two"])
        reload.yield()
        try await until("the new generation") { daemon.currentConfig().sources.map(\.name) == ["one", "two"] }
        let replies = try await ask(["two"])
        XCTAssertEqual(replies, [.result(source: "two", outcome: .ok)], "the new source polls in the new generation")
        // The old generation's sinks were shut down when it ended.
        XCTAssertEqual(script.lock.withLock { script.shutdowns }, 1)

        try write("[sources.broken]\nprovider = \"no-such-provider\"\n", to: "\(dir)/tidings.toml")
        reload.yield()
        // Refused: the running generation goes on and still answers.
        let again = try await ask(["two"])
        XCTAssertEqual(again, [.result(source: "two", outcome: .ok)])
        XCTAssertEqual(daemon.currentConfig().sources.map(\.name), ["one", "two"])
    }

    func testAGracefulStopEndsEveryServiceAndClosesTheSocket() async throws {
        try writeConfig(sources: ["one"])
        try start()
        _ = try await ask(["one"])
        let socket = ControlProtocol.socketPath(in: "\(dir)/state")
        XCTAssertTrue(FileManager.default.fileExists(atPath: socket))

        await group.triggerGracefulShutdown()
        try await running.value
        XCTAssertNil(try ControlClient.connect(path: socket), "the control socket stopped with the group")
        XCTAssertEqual(script.lock.withLock { script.shutdowns }, 1, "the generation's sinks were shut down")
        group = nil
    }
}
