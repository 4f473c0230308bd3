import FoundationEssentials
import Glibc
import Synchronization
import TidingsCurl
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Group commit's guarantee (issue 33) on the daemon's own path — scheduler, runner, recorder —
/// over a real SQLite file, on a virtual clock: a poll counts only once the COMMIT of its
/// batch is done, so a process that dies before that COMMIT loses none of what it recorded and
/// a fresh engine on the same file makes each event exactly once.
final class GroupCommitTests: XCTestCase {
    var path = ""
    var env: FixedEnvironment!
    var t0 = Date()
    let providers = (0..<3).map { _ in ItemsProvider() }

    override func setUpWithError() throws {
        path = try scratchDirectory() + "/tidings.sqlite"
        env = FixedEnvironment(draw: 0.5)
        t0 = env.time
        for p in providers { p.items = [Item(key: "a", kind: "k", title: "A")] }
    }

    /// Three sources polled every 60 s without jitter, their events routed to one sink.
    func scheduler(_ database: any StateDatabase) throws -> Scheduler {
        var settings = SourceSettings()
        settings.interval = 60
        settings.jitter = 0
        var config = try loadConfig("")
        config.sources = providers.enumerated().map { i, p in
            SourceConfig(name: "s\(i)", provider: "test", settings: settings, flapWindow: 0, instance: p, file: "t", line: nil, configHash: "h")
        }
        let runner = PollRunner(store: StateStore(database: database), http: CurlHTTPClient(), env: env)
        return Scheduler(
            config: config, runner: runner, router: Router(routes: [], allSinks: ["hook"]), env: env, host: HostConditions(),
            logger: quietLogger, onEvents: {})
    }

    func settle(_ scheduler: Scheduler) async throws { try await idle(scheduler, env) }

    func advance(to date: Date, _ scheduler: Scheduler) async throws {
        try await env.advance(to: date) { try await self.settle(scheduler) }
    }

    /// The file as a process that opens it now reads it.
    func onFile<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try StateStore(path: path).database.transaction(.read, body)
    }

    func nextDue() throws -> [Double] {
        try onFile { db in try db.fetchAll("SELECT next_due FROM source_state ORDER BY source").map { try $0[0] as Double } }
    }

    /// (events, deliveries, distinct (event, sink) pairs, distinct (source, key, type) events).
    func counts() throws -> [Int] {
        try onFile { db in
            try [
                "SELECT count(*) FROM event", "SELECT count(*) FROM delivery",
                "SELECT count(*) FROM (SELECT DISTINCT event_seq, sink FROM delivery) d",
                "SELECT count(*) FROM (SELECT DISTINCT source, key, type FROM event) e",
            ].map { try db.scalar($0) ?? -1 }
        }
    }

    /// The acceptance test: the process dies between the polls' transfers and their batch's
    /// COMMIT. Nothing of the batch is on file (the polls are not counted: next_due where the
    /// baseline left it, no event, no delivery); a fresh engine on the file polls them again
    /// and makes each event exactly once, one delivery each, and a later poll none more.
    func testACrashBeforeTheBatchCommitLosesNothingAndDuplicatesNothing() async throws {
        let store = ScriptedStore(base: try StateStore(path: path).database)
        let first = try scheduler(store)
        let task = Task { await first.run() }
        try await settle(first)
        // The baselines (the start-up spread: 2 s × draw 0.5), committed.
        try await advance(to: t0 + 2, first)
        XCTAssertEqual(providers.map(\.polls), [1, 1, 1])
        let baseline = try nextDue()
        XCTAssertEqual(baseline.count, 3)
        XCTAssertEqual(try counts(), [0, 0, 0, 0], "silent baselines")

        // A new item everywhere; the three polls due at once finish together and form one
        // batch, and the process dies at its COMMIT.
        for p in providers { p.items.append(Item(key: "b", kind: "k", title: "B")) }
        store.script {
            $0.hold = 3
            $0.dieAtCommit = true
        }
        try await advance(to: t0 + 62, first)
        XCTAssertEqual(providers.map(\.polls), [2, 2, 2], "the second polls ran: their transfers are done")
        XCTAssertEqual(store.lostBatches, [3], "they were in one batch, lost with its COMMIT")
        XCTAssertEqual(store.recorded, 3, "no poll of the lost batch was told it is recorded (the baselines were)")
        await first.stop()
        await task.value

        XCTAssertEqual(try nextDue(), baseline, "the lost polls are not counted: next_due not advanced")
        XCTAssertEqual(try counts(), [0, 0, 0, 0], "no event and no delivery of the lost batch")
        let unchanged: [Int] = try onFile { db in try db.fetchAll("SELECT failures FROM source_state").map { try $0[0] } }
        XCTAssertEqual(unchanged, [0, 0, 0])

        // A fresh engine on the same file (the real backend, its own group commit): the
        // sources are overdue and polled again soon; each event is made once.
        let fresh = try StateStore(path: path).database
        let second = try scheduler(fresh)
        let again = Task { await second.run() }
        try await settle(second)
        try await advance(to: env.time + 3, second)
        XCTAssertEqual(providers.map(\.polls), [3, 3, 3])
        XCTAssertEqual(try counts(), [3, 3, 3, 3], "one `new b` event per source, one delivery each")
        XCTAssertTrue(try nextDue().allSatisfy { $0 > env.time.timeIntervalSince1970 }, "counted: next_due advanced")
        // The next poll finds nothing new.
        try await advance(to: env.time + 61, second)
        XCTAssertEqual(providers.map(\.polls), [4, 4, 4])
        XCTAssertEqual(try counts(), [3, 3, 3, 3], "no event twice, no delivery twice")
        let keys: [String] = try onFile { db in try db.fetchAll("SELECT source || ' ' || type || ' ' || key FROM event ORDER BY source").map { try $0[0] } }
        XCTAssertEqual(keys, ["s0 new b", "s1 new b", "s2 new b"])
        await second.stop()
        await again.value
    }

    /// Polls that finish together are committed together (fewer commits than polls, counted
    /// at the store), and one whose recording fails in the batch fails alone: its savepoint
    /// is rolled back (not counted, no event), the other two are recorded.
    func testPollsFinishingTogetherShareACommitAndAFailingOneFailsAlone() async throws {
        let store = ScriptedStore(base: try StateStore(path: path).database)
        let engine = try scheduler(store)
        let task = Task { await engine.run() }
        try await settle(engine)
        store.script { $0.hold = 3 }
        try await advance(to: t0 + 2, engine)
        XCTAssertEqual(store.commits, [3], "three baselines, one commit")
        let baseline = try nextDue()

        for p in providers { p.items.append(Item(key: "b", kind: "k", title: "B")) }
        store.script {
            $0.hold = 3
            $0.failing = "s1"
        }
        try await advance(to: t0 + 62, engine)
        XCTAssertEqual(store.commits, [3, 3], "three polls in the second batch, one of which failed alone")
        let lastPoll: [Double] = try onFile { db in try db.fetchAll("SELECT last_poll FROM source_state ORDER BY source").map { try $0[0] } }
        XCTAssertEqual(lastPoll[1], baseline[1] - 60, "the failed poll is not recorded (the runner only stores its retry)")
        XCTAssertEqual(lastPoll[0], baseline[0], "recorded")
        XCTAssertEqual(lastPoll[2], baseline[2], "recorded")
        let events: [String] = try onFile { db in try db.fetchAll("SELECT source FROM event ORDER BY source").map { try $0[0] } }
        XCTAssertEqual(events, ["s0", "s2"], "the failed poll's event went with its savepoint")
        await engine.stop()
        await task.value
    }
}

/// A real SQLite state behind a script: its poll writes are committed in batches (the same
/// ``GroupCommit`` the backends use) on threads of its own, formed as the script says; it
/// counts the commits, fails a source's write inside its batch, or dies at a batch's COMMIT
/// like the process: the transaction rolled back, and nothing more reaches the file.
final class ScriptedStore: StateDatabase, @unchecked Sendable {
    struct Script {
        /// A batch starts once this many writes wait (then every one waiting).
        var hold = 1
        /// The next batch's COMMIT never happens: the process dies there.
        var dieAtCommit = false
        /// The write of this source fails inside its batch (after its statements ran).
        var failing: String?
    }
    struct Died: Error {}
    struct ScriptedFailure: Error {}

    let base: any StateDatabase
    private let state = Mutex((script: Script(), dead: false, commits: [Int](), lost: [Int](), resumed: 0))
    private let group = GroupCommit()

    init(base: any StateDatabase) { self.base = base }

    func script(_ change: (inout Script) -> Void) { state.withLock { change(&$0.script) } }
    /// The writes each committed batch held (those that failed alone too).
    var commits: [Int] { state.withLock { $0.commits } }
    /// Grouped writes whose callers were told they are recorded.
    var recorded: Int { state.withLock { $0.resumed } }
    /// The writes each batch lost at its COMMIT held.
    var lostBatches: [Int] { state.withLock { $0.lost } }

    var location: String { base.location }
    var dialect: SQLDialect { base.dialect }
    var isShared: Bool { base.isShared }

    private func alive() throws {
        if state.withLock({ $0.dead }) { throw Died() }
    }

    func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        try alive()
        return try base.transaction(kind, body)
    }

    func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try alive()
        return try await base.perform(kind, body)
    }

    func performGrouped<T: Sendable>(order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try alive()
        let failing = state.withLock { $0.script.failing == order }
        let value = try await group.perform(
            order: order,
            { db in
                let value = try body(db)
                if failing { throw ScriptedFailure() }
                return value
            },
            schedule: {
                guard !state.withLock({ $0.dead }) else { return false }
                if group.unfinished >= state.withLock({ $0.script.hold }) {
                    startDetachedThread(name: "scripted-batch") { while self.group.runPending({ try self.commit($0) }) {} }
                }
                return true
            }, refused: Died())
        state.withLock { $0.resumed += 1 }
        return value
    }

    /// One batch's transaction on the real file, unless the process dies at its COMMIT.
    private func commit(_ batch: (any SQLConnection) throws -> Void) throws {
        try alive()
        var writes = 0
        try base.transaction(.write) { db in
            try batch(CountingSavepoints(base: db, count: { writes += 1 }))
            try state.withLock { s in
                guard s.script.dieAtCommit else { return }
                s.dead = true
                s.lost.append(writes)
                throw Died()
            }
        }
        state.withLock {
            $0.commits.append(writes)
            $0.script.hold = 1
        }
    }

    func close() async { await base.close() }

    /// Counts the writes of a batch (their savepoints).
    private struct CountingSavepoints: SQLConnection {
        let base: any SQLConnection
        let count: () -> Void
        var dialect: SQLDialect { base.dialect }
        func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int { try base.execute(sql, arguments) }
        func fetchAll(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] { try base.fetchAll(sql, arguments) }
        func executeMany(_ sql: String, _ rows: [[SQLValue]]) throws { try base.executeMany(sql, rows) }
        func savepoint(_ step: SavepointStep) throws {
            if step == .begin { count() }
            try base.savepoint(step)
        }
    }
}

/// Answers with its items (as the test sets them) and counts its polls.
final class ItemsProvider: Provider, Sendable {
    private let state = Mutex((items: [Item](), polls: 0))
    var items: [Item] {
        get { state.withLock { $0.items } }
        set { state.withLock { $0.items = newValue } }
    }
    var polls: Int { state.withLock { $0.polls } }
    func poll(_ ctx: PollContext) async throws -> PollResult {
        state.withLock {
            $0.polls += 1
            return .snapshot($0.items)
        }
    }
}
