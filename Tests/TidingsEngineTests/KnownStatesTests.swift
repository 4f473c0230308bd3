import Foundation
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI

/// Answers each poll with the items it is given and an ETag, and remembers the ETag each poll sent.
private final class TaggedProvider: Provider, @unchecked Sendable {
    let answers = Mutex<[(items: [Item], etag: String)]>([])
    let sent = Mutex<[String?]>([])
    func poll(_ ctx: PollContext) async throws -> PollResult {
        sent.withLock { $0.append(ctx.validators.etag) }
        let answer = answers.withLock { $0.count > 1 ? $0.removeFirst() : $0[0] }
        return .snapshot(answer.items, validators: Validators(etag: answer.etag))
    }
}

/// `tidings check` reads the state rows of its sources in one read (``SourceStates``) instead of
/// one read per poll: a poll starts from that row (its validators, its health), and a row that
/// moved since that read is no harm (the write finds it moved and records from a fresh read).
final class KnownStatesTests: XCTestCase {
    private func source(_ name: String, _ p: TaggedProvider) -> SourceConfig {
        SourceConfig(name: name, provider: "tagged", settings: SourceSettings(), flapWindow: 0, instance: p, file: "t", line: nil, configHash: "h")
    }

    private func item(_ key: String) -> Item { Item(key: key, kind: "k", title: key) }

    private func newEvents(_ store: StateStore, _ source: String) throws -> [String] {
        try store.database.read { db in
            try db.fetchAll("SELECT key FROM event WHERE source = ? AND type = 'new' ORDER BY key", source).map { try $0[0] as String }
        }
    }

    func testPollsStartFromTheRowsReadTogether() async throws {
        let store = try makeTestStore()
        let a = TaggedProvider()
        let b = TaggedProvider()
        a.answers.withLock { $0 = [([item("1")], "a1"), ([item("1"), item("2")], "a2")] }
        b.answers.withLock { $0 = [([item("x")], "b1")] }
        let runner = PollRunner(store: store, http: testHTTP)
        let options = RecordOptions(router: nil)
        for s in [source("a", a), source("b", b)] { _ = await runner.poll(s, options: options, logger: quietLogger) }

        // "c" has no row yet: nil, as a poll's own read gives.
        let known = try await SourceStates.read(store, sources: ["a", "b", "c"])
        XCTAssertEqual(known.state(of: "a")?.etag, "a1")
        XCTAssertEqual(known.state(of: "b")?.etag, "b1")
        XCTAssertNil(known.state(of: "c"))
        // The polls below start from `known`, not from a read of their own: b's row, changed
        // behind it, is not what b's poll sends.
        _ = try await store.database.write { try $0.execute("UPDATE source_state SET etag = 'changed' WHERE source = 'b'", []) }

        let outcomes = await PollLimits(maxConcurrent: 4, maxPerHost: 4).pollAll(
            [source("a", a), source("b", b)], runner: runner, options: options, logger: quietLogger, known: known)
        XCTAssertEqual(outcomes.map { $0.error?.message }, [nil, nil])
        XCTAssertEqual(a.sent.withLock { $0 }, [nil, "a1"], "the second poll sent the ETag of the row read together")
        XCTAssertEqual(b.sent.withLock { $0 }, [nil, "b1"])
        XCTAssertEqual(try newEvents(store, "a"), ["2"])
    }

    func testARowThatMovedAfterTheReadIsRecordedOnceFromAFreshRead() async throws {
        let store = try makeTestStore()
        let a = TaggedProvider()
        a.answers.withLock { $0 = [([item("1")], "a1"), ([item("1"), item("2")], "a2"), ([item("1"), item("2"), item("3")], "a3")] }
        let runner = PollRunner(store: store, http: testHTTP)
        let options = RecordOptions(router: nil)
        _ = await runner.poll(source("a", a), options: options, logger: quietLogger)  // baseline: 1
        let stale = try await SourceStates.read(store, sources: ["a"])
        _ = await runner.poll(source("a", a), options: options, logger: quietLogger)  // 2 is new; the row moves
        let outcome = await runner.poll(source("a", a), options: options, logger: quietLogger, known: stale)  // 3 is new
        XCTAssertNil(outcome.error)
        XCTAssertEqual(try newEvents(store, "a"), ["2", "3"], "each item new once: the stale row's poll recorded from a fresh read")
        let etag = try await store.database.read { try SourceState.read($0, source: "a")?.etag }
        XCTAssertEqual(etag, "a3")
    }
}
