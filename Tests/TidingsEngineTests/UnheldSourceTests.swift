import Foundation
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI
import TidingsProviders

/// Counts, per source, how often a provider was built and polled (the `tallied` provider).
private final class Tally: Sendable {
    let counts = Mutex<(builds: [String: Int], polls: [String: Int])>(([:], [:]))
    func built(_ name: String) { counts.withLock { $0.builds[name, default: 0] += 1 } }
    func polled(_ name: String) { counts.withLock { $0.polls[name, default: 0] += 1 } }
    var builds: [String: Int] { counts.withLock { $0.builds } }
    var polls: [String: Int] { counts.withLock { $0.polls } }
}

/// One item named after its source and its `label` option.
private struct TalliedProvider: Provider {
    var source: String
    var label: String
    var tally: Tally
    func poll(_ context: PollContext) async throws -> PollResult {
        tally.polled(source)
        return .snapshot([Item(key: "\(source)-\(label)", kind: "k", title: label)])
    }
}

/// Issue 33: where daemons share a PostgreSQL state, a source this instance does not hold keeps
/// no provider; it gets one, built from the loaded declaration, when its lease is taken, and
/// drops it when the lease is lost. Real loader and leases; the state is SQLite, or PostgreSQL
/// with TIDINGS_TEST_BACKEND=postgres; virtual clock.
final class UnheldSourceTests: XCTestCase {
    private let tally = Tally()

    private func load(_ plugins: [String: String]) throws -> TidingsConfig {
        let dir = try scratchDirectory()
        // Loading does not connect: the URL only says the state is shared.
        try write(
            "[defaults]\ninterval = \"1h\"\njitter = 0\n[state]\nurl = \"postgres://tidings@127.0.0.1:1/none\"\nsslmode = \"disable\"\n",
            to: "\(dir)/tidings.toml")
        try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
        for (name, text) in plugins { try write(text, to: "\(dir)/plugins.d/\(name).toml") }
        var loader = testLoader
        let tally = self.tally
        loader.providers.register(
            ProviderFactory(name: "tallied", summary: "test") { r, setup, _ in
                let label = try r.string("label") ?? ""
                _ = try r.secret("token", required: false)
                tally.built(setup.sourceName)
                return TalliedProvider(source: setup.sourceName, label: label, tally: tally)
            })
        loader.recipesWhereShared = true
        return try loader.load(file: "\(dir)/tidings.toml")
    }

    func testAnUnheldSourceHoldsNoProviderAndGetsOneWhenItsLeaseIsTaken() async throws {
        let config = try load([
            "a": "provider = \"tallied\"\nlabel = \"first\"\n", "b": "provider = \"tallied\"\nlabel = \"second\"\n",
            "c": "provider = \"tallied\"\nlabel = \"third\"\n",
            "secret": "provider = \"tallied\"\nlabel = \"fourth\"\ntoken = \"a-token-long-enough-to-be-one\"\n",
        ])
        XCTAssertEqual(tally.builds, ["a": 1, "b": 1, "c": 1, "secret": 1], "every source is built once at load (its errors are found there)")
        XCTAssertNotNil(config.builder)
        let kept = config.sources.filter { $0.recipe != nil }.map(\.name)
        XCTAssertEqual(kept, ["a", "b", "c"], "a source with a secret stays built (building it again would read the secret again)")
        for s in config.sources where s.recipe != nil { XCTAssertTrue(s.instance is UnbuiltProvider) }

        // Built again from its recipe: the same source as the load built, even after its file
        // was edited (the running configuration is the loaded one until a reload).
        let a = try XCTUnwrap(config.source(named: "a"))
        try write("provider = \"tallied\"\nlabel = \"edited\"\n", to: a.file)
        let rebuilt = try XCTUnwrap(config.builder).build(a)
        XCTAssertNil(rebuilt.recipe)
        XCTAssertEqual(rebuilt.configHash, a.configHash)
        XCTAssertEqual((rebuilt.instance as? TalliedProvider)?.label, "first")
        XCTAssertEqual(rebuilt.settings, a.settings)

        // Two instances share the state: `other` holds every lease, this one none.
        let store = try makeTestStore()
        let env = FixedEnvironment()
        let t0 = env.time
        func keeper(_ n: Int) -> LeaseKeeper {
            LeaseKeeper(
                database: store.database, instance: Instance(id: "instance-\(n)", host: "host", pid: Int32(n)), sources: config.sources, sinks: [],
                env: env, logger: quietLogger)
        }
        let (mine, other) = (keeper(1), keeper(2))
        await other.round { _, _ in }
        await mine.round { _, _ in }
        XCTAssertEqual(mine.sources, [])
        let scheduler = Scheduler(
            config: config, runner: PollRunner(store: store, http: testHTTP, env: env), router: Router(routes: [], allSinks: []), env: env,
            host: HostConditions(), leases: mine, logger: quietLogger, onEvents: {})
        let before = tally.builds
        for name in ["a", "b", "c"] {
            let has = await scheduler.hasProvider(name)
            XCTAssertFalse(has, "\(name): not held, no provider")
        }
        let held = await scheduler.hasProvider("secret")
        XCTAssertTrue(held, "a source kept built has its provider whether held or not")

        // The other instance gives up what is beyond its share; this one takes it.
        try await env.advance(to: t0 + 1)
        await other.round { _, _ in }
        try await env.advance(to: t0 + 2)
        await mine.round { sources, _ in await scheduler.leasesChanged(sources) }
        let taken = mine.sources
        XCTAssertFalse(taken.isEmpty, "this instance took its share")
        for name in ["a", "b", "c"] {
            let has = await scheduler.hasProvider(name)
            XCTAssertFalse(has, "\(name): built at its first poll, not at the takeover")
        }
        XCTAssertEqual(tally.builds, before)

        // A held source's first poll builds its provider, from the declaration as loaded; the
        // next poll uses the same one.
        let name = try XCTUnwrap(taken.filter { $0 != "secret" }.sorted().first)
        let source = try XCTUnwrap(config.source(named: name))
        let outcome = await scheduler.pollNow([source])
        XCTAssertNil(outcome.first?.error)
        XCTAssertEqual(tally.polls[name], 1)
        XCTAssertEqual(tally.builds[name], (before[name] ?? 0) + 1, "built once, at the first poll")
        let keeps = await scheduler.hasProvider(name)
        XCTAssertTrue(keeps, "kept while the lease is held")
        let builds = tally.builds
        let second = await scheduler.pollNow([source])
        XCTAssertNil(second.first?.error)
        XCTAssertEqual(tally.polls[name], 2)
        XCTAssertEqual(tally.builds, builds, "the held provider is the one polled")

        // The lease is lost (this instance stopped renewing; the other took it when it expired):
        // its provider goes.
        try await env.advance(to: t0 + 120)
        await other.round { _, _ in }
        try await env.advance(to: t0 + 121)
        await mine.round { sources, _ in await scheduler.leasesChanged(sources) }
        XCTAssertFalse(mine.sources.contains(name), "the other instance took the expired lease")
        let has = await scheduler.hasProvider(name)
        XCTAssertFalse(has, "a lost lease drops the provider")

        // A poll on request of a source not held builds its provider for that poll only.
        let again = await scheduler.pollNow([source])
        XCTAssertNil(again.first?.error)
        XCTAssertEqual(tally.polls[name], 3)
        XCTAssertEqual(tally.builds[name], (builds[name] ?? 0) + 1)
        let kept2 = await scheduler.hasProvider(name)
        XCTAssertFalse(kept2)

        // A scheduler that starts holding leases builds their providers at their scheduled
        // polls (the start-up spread: within seconds here), and only theirs.
        let theirs = other.sources.subtracting(["secret"])
        XCTAssertFalse(theirs.isEmpty)
        let starting = Scheduler(
            config: config, runner: PollRunner(store: store, http: testHTTP, env: env), router: Router(routes: [], allSinks: []), env: env,
            host: HostConditions(), leases: other, logger: quietLogger, onEvents: {})
        let task = Task { await starting.run() }
        let settle = { try await idle(starting, env) }
        try await settle()
        let polls = tally.polls
        try await env.advance(by: 10, settle: settle)
        for n in ["a", "b", "c"] {
            let has = await starting.hasProvider(n)
            XCTAssertEqual(has, theirs.contains(n), "\(n): built at its first scheduled poll exactly when held")
            XCTAssertEqual(tally.polls[n, default: 0], polls[n, default: 0] + (theirs.contains(n) ? 1 : 0))
        }
        await starting.stop()
        await task.value
    }

    func testOnlyTheDaemonsLoadOnASharedStateKeepsRecipes() throws {
        let source = "[sources.m]\nprovider = \"exec\"\ncommand = [\"true\"]\ninterval = \"10m\"\n"
        let shared = "[state]\nurl = \"postgres://tidings@127.0.0.1:1/none\"\nsslmode = \"disable\"\n"
        func load(_ text: String, daemon: Bool) throws -> TidingsConfig {
            var loader = testLoader
            loader.recipesWhereShared = daemon
            let dir = try scratchDirectory()
            try write(text, to: "\(dir)/tidings.toml")
            try FileManager.default.createDirectory(atPath: "\(dir)/plugins.d", withIntermediateDirectories: true)
            return try loader.load(file: "\(dir)/tidings.toml")
        }
        let sqlite = try load(source, daemon: true)
        XCTAssertNil(sqlite.builder)
        XCTAssertNil(sqlite.sources[0].recipe, "SQLite: one daemon polls every source")
        XCTAssertNil(try load(shared + source, daemon: false).sources[0].recipe, "other commands build every source")

        // A source of the main file: built again with the main file's folder as its base.
        let config = try load(shared + source, daemon: true)
        let m = config.sources[0]
        XCTAssertNotNil(m.recipe)
        let built = try XCTUnwrap(config.builder).build(m)
        XCTAssertEqual(built.configHash, m.configHash)
        XCTAssertEqual(built.settings.interval, 600)
        XCTAssertTrue(built.instance is ExecProvider)
    }
}

/// What every source keeps, compactly (issue 33): shared settings, its file as folder and name,
/// its hash in 8 bytes; each reads back as it was given.
final class CompactSourceTests: XCTestCase {
    func source(file: String, hash: String, interval: TimeInterval = 300) -> SourceConfig {
        var settings = SourceSettings()
        settings.interval = interval
        return SourceConfig(name: "s", provider: "http-json", settings: settings, flapWindow: 0, instance: UnbuiltProvider(), file: file, configHash: hash)
    }

    func testFieldsReadBackAsGiven() {
        for file in ["/etc/tidings/plugins.d/a.toml", "/a.toml", "a.toml", "rel/dir/b.toml", "", "/"] {
            XCTAssertEqual(source(file: file, hash: "h").file, file)
        }
        let hex = Fingerprint.of(["x"])
        XCTAssertEqual(hex.utf8.count, 16)
        for hash in [hex, "000000000000000a", "h1", "", "ABCDEF0123456789", "0123456789abcdefg"] {
            XCTAssertEqual(source(file: "f", hash: hash).configHash, hash)
        }
        var s = source(file: "/x/y.toml", hash: hex)
        s.settings.jitter = 0.3
        s.file = "/z/w.toml"
        s.configHash = "h2"
        XCTAssertEqual(s.settings.jitter, 0.3)
        XCTAssertEqual(s.settings.interval, 300)
        XCTAssertEqual(s.file, "/z/w.toml")
        XCTAssertEqual(s.configHash, "h2")
    }

    func testSourcesWithEqualSettingsShareThem() {
        let a = source(file: "/p/a.toml", hash: "h")
        let b = source(file: "/p/b.toml", hash: "h")
        let c = source(file: "/p/c.toml", hash: "h", interval: 60)
        XCTAssertTrue(a.sharesSettings(with: b))
        XCTAssertFalse(a.sharesSettings(with: c))
        var d = c
        d.settings.interval = 300
        XCTAssertTrue(d.sharesSettings(with: a), "settings changed to equal ones share again")
        XCTAssertEqual(c.settings.interval, 60, "the copy's change leaves the original alone")
    }
}
