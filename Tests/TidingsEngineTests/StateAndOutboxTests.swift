import Foundation
import TidingsCurl
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class StateAndOutboxTests: XCTestCase {
    var dir = ""
    var store: StateStore!
    let provider = ScriptedProvider()
    lazy var source = SourceConfig(
        name: "s", provider: "scripted", settings: SourceSettings(), flapWindow: 0, instance: provider,
        file: "test", line: nil, configHash: "h1")

    override func setUpWithError() throws {
        dir = try scratchDirectory()
        store = try makeTestStore()
    }

    func count(_ table: String) throws -> Int {
        try store.scalar("SELECT count(*) FROM \(table)") ?? -1
    }

    func testPollRecordsItemsEventsAndOutboxTogether() throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["a", "b"]))
        let now = Date()
        _ = try rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "one")]), now: now, options: route)
        XCTAssertEqual(try count("event"), 0, "baseline is silent")
        let r = try rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "one"), Item(key: "2", kind: "k", title: "two")]), now: now, options: route)
        XCTAssertEqual(r.events.map(\.key), ["2"])
        XCTAssertEqual(try count("event"), 1)
        XCTAssertEqual(try count("delivery"), 2, "one row per (event, sink)")
        XCTAssertEqual(try count("item"), 2)
    }

    func testDryRunChangesNothing() throws {
        let rec = PollRecorder(store: store)
        _ = try rec.recordSuccess(source, result: .snapshot([]), now: Date(), options: RecordOptions(router: nil))
        let r = try rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "one")]), now: Date(), options: RecordOptions(router: nil, dryRun: true))
        XCTAssertEqual(r.events.count, 1)
        XCTAssertEqual(try count("event"), 0)
        XCTAssertEqual(try count("item"), 0)
    }

    func testErrorEventOnceAtThresholdThenRecovered() throws {
        let rec = PollRecorder(store: store)
        let opts = RecordOptions(router: nil)
        _ = try rec.recordSuccess(source, result: .snapshot([]), now: Date(), options: opts)
        let err = PollError(.transient, "HTTP 500")
        let counts = try (1...5).map { _ in try rec.recordFailure(source, error: err, now: Date(), options: opts).events.count }
        XCTAssertEqual(counts, [0, 0, 1, 0, 0], "error_threshold = 3: one event, never one per failure")
        let ok = try rec.recordSuccess(source, result: .snapshot([]), now: Date(), options: opts)
        XCTAssertEqual(ok.events.map(\.event), [.recovered])
        XCTAssertEqual(ok.events.first?.kind, "source")
    }

    func testAuthFailureIsImmediateAndParksTheSource() async throws {
        let runner = PollRunner(store: store, http: CurlHTTPClient())
        provider.failure = PollError(.auth, "credentials rejected")
        let first = await runner.poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        XCTAssertEqual(first.record.events.map(\.event), [.error])
        guard case .authFailed = first else { return XCTFail("\(first)") }
        XCTAssertNil(first.next, "not on schedule until the configuration changes")
        provider.failure = nil
        let second = await runner.poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        guard case .skipped = second else { return XCTFail("no new login while the config is unchanged: \(second)") }
        var changed = source
        changed.configHash = "h2"
        let third = await runner.poll(changed, options: RecordOptions(router: nil), logger: quietLogger)
        XCTAssertNil(third.error, "a changed config tries again")
    }

    /// A poll reads its `source_state` row once (before the provider call) and writes it once
    /// (at the end of its transaction): baseline, changes, a 304, failures up to the `error`
    /// event, the recovery. (Before the pipeline: 5 statements per successful poll.)
    func testAPollReadsAndWritesItsSourceRowOnce() async throws {
        let log = StatementLog(store.database)
        let runner = PollRunner(store: StateStore(database: log), http: CurlHTTPClient())
        let opts = RecordOptions(router: Router(routes: [], allSinks: ["a"]))
        var write = "INSERT"  // the first poll makes the row
        func poll(_ items: [Item]?, failure: PollError? = nil) async throws -> PollOutcome {
            provider.items = items ?? provider.items
            provider.failure = failure
            _ = log.take(touching: "source_state")
            let outcome = await runner.poll(source, options: opts, logger: quietLogger)
            let statements = log.take(touching: "source_state")
            XCTAssertEqual(statements.count, 2, "\(statements)")
            XCTAssertTrue(statements.first?.hasPrefix("SELECT") == true, "\(statements)")
            XCTAssertTrue(statements.last?.hasPrefix(write) == true, "\(statements)")
            write = "UPDATE"
            return outcome
        }
        let baseline = try await poll([Item(key: "1", kind: "k", title: "one")])
        XCTAssertEqual(baseline.record.baselineCount, 1)
        let new = try await poll([Item(key: "1", kind: "k", title: "one"), Item(key: "2", kind: "k", title: "two")])
        XCTAssertEqual(new.record.events.map(\.event), [.new])
        var failures: [[EventType]] = []
        for _ in 1...3 { failures.append(try await poll(nil, failure: PollError(.transient, "HTTP 500")).record.events.map(\.event)) }
        XCTAssertEqual(failures, [[], [], [.error]], "error_threshold = 3")
        let recovered = try await poll(nil)
        XCTAssertEqual(recovered.record.events.map(\.event), [.recovered])
        XCTAssertEqual(recovered.record.health, .ok)
        let read = try await store.database.read { try SourceState.read($0, source: "s") }
        let row = try XCTUnwrap(read)
        XCTAssertEqual(row.failures, 0)
        XCTAssertFalse(row.errorReported)
        XCTAssertNotNil(row.baselineAt)
        XCTAssertEqual(try count("delivery"), 3, "new, error and recovered, each to sink a")
    }

    /// The row a poll read at its start changed before its write (another writer, `state
    /// forget`): the poll is recorded again from the row as it is, not over it.
    func testAPollWhoseRowMovedIsRecordedFromTheRowAsItIs() async throws {
        let rec = PollRecorder(store: store)
        let opts = RecordOptions(router: nil)
        _ = try await rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "one")]), now: Date(), options: opts)
        var stale = try await store.database.read { try SourceState.read($0, source: "s") }
        XCTAssertNotNil(stale?.baselineAt)
        _ = try await rec.recordFailure(source, error: PollError(.transient, "HTTP 500"), now: Date(), options: opts)
        let failed = try await rec.record(
            source, .failure(PollError(.transient, "HTTP 500"), notBefore: nil, nextDue: { _ in nil }), now: Date(),
            options: opts, prior: .read(stale))
        XCTAssertEqual(failed.failures, 2, "counted on the row as it is, not as read")

        stale = try await store.database.read { try SourceState.read($0, source: "s") }
        try store.forget(source: "s")
        let afterForget = try await rec.record(
            source, .success(.snapshot([Item(key: "1", kind: "k", title: "one"), Item(key: "2", kind: "k", title: "two")]), nextDue: nil),
            now: Date(), options: opts, prior: .read(stale))
        XCTAssertEqual(afterForget.baselineCount, 2, "forgotten meanwhile: a silent baseline, not two new items")
        XCTAssertEqual(afterForget.events.count, 0)

        let none = try await rec.record(
            source, .failure(PollError(.transient, "HTTP 500"), notBefore: nil, nextDue: { _ in nil }), now: Date(),
            options: opts, prior: .read(nil))
        XCTAssertEqual(none.failures, 1, "a row made meanwhile is not inserted over")
    }

    /// A removed item stays in the table as `gone` (not read back each poll); when it
    /// returns it is `new` again, first seen now, in the same row.
    func testRemovedItemThatReturnsIsNewAgain() throws {
        let rec = PollRecorder(store: store)
        let opts = RecordOptions(router: nil)
        let a = Item(key: "a", kind: "k", title: "A")
        let b = Item(key: "b", kind: "k", title: "B")
        let t0 = Date(timeIntervalSince1970: 1_790_000_000)
        _ = try rec.recordSuccess(source, result: .snapshot([a, b]), now: t0, options: opts)
        let removed = try rec.recordSuccess(source, result: .snapshot([a]), now: t0 + 60, options: opts)
        XCTAssertEqual(removed.events.map(\.event), [.removed])
        let quiet = try rec.recordSuccess(source, result: .snapshot([a]), now: t0 + 120, options: opts)
        XCTAssertEqual(quiet.events.count, 0, "a gone item is not removed twice")
        let back = try rec.recordSuccess(source, result: .snapshot([a, b]), now: t0 + 180, options: opts)
        XCTAssertEqual(back.events.map(\.event), [.new])
        XCTAssertEqual(try count("item"), 2)
        let firstSeen: Double? = try store.scalar("SELECT first_seen FROM item WHERE key = 'b'")
        XCTAssertEqual(firstSeen, (t0 + 180).timeIntervalSince1970)
    }

    /// The next poll time is part of the poll's own commit (one transaction per poll), for
    /// successes and failures alike, so a restart resumes the schedule the poll decided.
    func testNextDueIsStoredWithThePoll() async throws {
        let runner = PollRunner(store: store, http: CurlHTTPClient())
        func stored() throws -> Double? {
            try store.scalar("SELECT next_due FROM source_state WHERE source = ?", self.source.name) as Double?
        }
        let succeeded = await runner.poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        let ok = try XCTUnwrap(succeeded.next)
        XCTAssertFalse(ok.store, "stored with the poll")
        XCTAssertEqual(try XCTUnwrap(stored()), ok.due.timeIntervalSince1970, accuracy: 0.001)
        provider.failure = PollError(.transient, "HTTP 503")
        let failure = await runner.poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        let failed = try XCTUnwrap(failure.next)
        XCTAssertFalse(failed.store, "stored with the poll")
        XCTAssertGreaterThan(failed.due, ok.due.addingTimeInterval(-1000))
        XCTAssertEqual(try XCTUnwrap(stored()), failed.due.timeIntervalSince1970, accuracy: 0.001)
    }

    func testOutboxRetriesInOrderThenDeadLetters() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let t0 = Date()
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: t0, options: route)
        let events = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "a"), Item(key: "2", kind: "k", title: "b")]), now: t0, options: route
        ).events
        let sink = ScriptedSink()
        sink.failures = [DeliveryError(.retryable, "503")]
        let env = FixedEnvironment(time: t0)
        let worker = OutboxWorker(
            store: store, sinks: ["x": sink], policy: RetryPolicy(first: 2, cap: 60, jitter: 0, maxAge: 100), env: env, logger: quietLogger)

        let failed = await worker.drainOnce()
        XCTAssertEqual(failed["x"], OutboxWorker.Failure(outcome: .queued, message: "503"))
        XCTAssertEqual(sink.delivered, [], "the failing head blocks later rows: per-sink order")
        let notDue = await worker.drainOnce()
        XCTAssertEqual(notDue, [:], "not due yet: nothing attempted")
        XCTAssertEqual(sink.delivered, [])
        env.time = t0 + 3
        let retried = await worker.drainOnce()
        XCTAssertEqual(retried, [:])
        XCTAssertEqual(sink.delivered, events.map(\.id), "delivered in order, same ids")
        XCTAssertEqual(try count("delivery"), 0)

        // A permanent failure is dead at once; a retryable one past max_age too.
        let more = try await rec.recordSuccess(
            source,
            result: .snapshot([
                Item(key: "1", kind: "k", title: "a"), Item(key: "2", kind: "k", title: "b"), Item(key: "3", kind: "k", title: "c"),
            ]), now: env.time, options: route
        ).events
        XCTAssertEqual(more.map(\.key), ["3"])
        sink.failures = [DeliveryError(.permanent, "400 bad request")]
        _ = await worker.drainOnce()
        let dead = try store.rows("SELECT status, last_error FROM delivery")
        XCTAssertEqual(try dead.map { try $0[0] as String }, ["dead"])
        XCTAssertEqual(try dead.map { try $0[1] as String }, ["400 bad request"])
        XCTAssertFalse(sink.delivered.contains(more[0].id))
    }

    /// Issue 9, item 1: a row whose event cannot be read (older versions stored a too-deep
    /// event as `{}`) used to hide from the head query and block its sink for ever. It is a
    /// dead letter with the reason, and the sink goes on with the next row.
    func testUnreadableRowIsADeadLetterAndTheSinkGoesOn() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let t0 = Date()
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: t0, options: route)
        let events = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "a"), Item(key: "2", kind: "k", title: "b"), Item(key: "3", kind: "k", title: "c")]),
            now: t0, options: route
        ).events
        try XCTSkipIf(store.database.dialect != .sqlite, "a SQLite file edited by hand (foreign keys off)")
        try store.sqlite.withoutTransaction { db in
            try db.execute("UPDATE event SET payload = '{}' WHERE id = ?", events[0].id)
            // An event row that is gone altogether (foreign keys off, as a hand-edited file could be).
            try db.execute("PRAGMA foreign_keys = OFF")
            try db.execute("DELETE FROM event WHERE id = ?", events[1].id)
            try db.execute("PRAGMA foreign_keys = ON")
        }
        let before = try OutboxStore(store: store).entries()
        XCTAssertEqual(before.map(\.status), [.dead, .dead, .pending], "`tidings outbox` shows them for what they are")
        XCTAssertEqual(before.map(\.eventID), [events[0].id, nil, events[2].id])
        XCTAssertNil(before[0].event)
        XCTAssertEqual(before[0].lastError, "cannot read the stored event: event: missing 'event'")

        let sink = ScriptedSink()
        let worker = OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(), env: FixedEnvironment(time: t0), logger: quietLogger)
        let failures = await worker.drainOnce()
        XCTAssertEqual(sink.delivered, [events[2].id], "the sink goes on with the next row")
        let rows = try store.rows("SELECT status, last_error, attempts FROM delivery ORDER BY id")
        XCTAssertEqual(try rows.map { try $0[0] as String }, ["dead", "dead"])
        XCTAssertEqual(
            try rows.map { try $0[1] as String },
            [
                "cannot read the stored event: event: missing 'event'",
                "cannot read the stored event: its event is missing from the state",
            ])
        XCTAssertEqual(try rows.map { try $0[2] as Int }, [0, 0], "never attempted")
        XCTAssertEqual(failures["x"]?.outcome, .dead)
        let json = try XCTUnwrap(OutboxStore(store: store).entries().first?.json)
        XCTAssertEqual(json["event"], .null)
        XCTAssertEqual(json["event_id"], .string(events[0].id))
        XCTAssertEqual(json["status"], "dead")
    }

    /// The daemon's loop, not only `check --deliver`, gets past an unreadable head.
    func testDaemonLoopGetsPastAnUnreadableHead() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let env = FixedEnvironment()
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: env.time, options: route)
        let events = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "a"), Item(key: "2", kind: "k", title: "b")]), now: env.time, options: route
        ).events
        try store.exec("UPDATE event SET payload = '{}' WHERE id = ?", events[0].id)
        let sink = ScriptedSink()
        let worker = OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(), env: env, logger: quietLogger)
        let running = Task { await worker.run() }
        try await env.sleeping(atLeast: 1)  // the loop, with nothing left to send
        worker.stop()
        await running.value
        XCTAssertEqual(sink.delivered, [events[1].id])
    }

    /// The daemon's loop waits for a retry on its environment's clock: a failed delivery goes
    /// again when the clock reaches its backoff (2 s, no jitter), not before.
    func testDaemonLoopRetriesWhenTheClockReachesTheBackoff() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let env = FixedEnvironment()
        let t0 = env.time
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: t0, options: route)
        let events = try await rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "a")]), now: t0, options: route).events
        let sink = ScriptedSink()
        sink.failures = [DeliveryError(.retryable, "503")]
        let worker = OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(first: 2, cap: 60, jitter: 0), env: env, logger: quietLogger)
        let running = Task { await worker.run() }
        try await env.sleeping(atLeast: 1)  // the first attempt failed
        XCTAssertEqual(env.nextDeadline, t0 + 2, "the loop sleeps until the retry is due")
        try await env.advance(to: t0 + 1.9)
        XCTAssertEqual(sink.delivered, [], "not before its backoff")
        try await env.advance(to: t0 + 2)
        XCTAssertEqual(sink.delivered, events.map(\.id), "the retry")
        XCTAssertEqual(env.nextDeadline, t0 + 2 + 60, "then nothing to send: a minute's sleep")
        worker.stop()
        await running.value
    }

    /// Issue 9, item 22: `check --deliver` words a failure by what became of the delivery.
    func testDrainSaysWhatBecameOfEachFailure() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let t0 = Date()
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: t0, options: route)
        let sink = ScriptedSink()
        let worker = OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(maxAge: 100), env: FixedEnvironment(time: t0), logger: quietLogger)
        var items: [Item] = []
        func failing(_ error: DeliveryError) async throws -> OutboxWorker.Failure? {
            items.append(Item(key: "\(items.count)", kind: "k", title: "t"))
            _ = try await rec.recordSuccess(source, result: .snapshot(items), now: t0, options: route)
            sink.failures = [error]
            return await worker.drainOnce()["x"]
        }
        let refused = try await failing(DeliveryError(.permanent, "HTTP 400"))
        XCTAssertEqual(refused?.outcome, .dead)
        let down = try await failing(DeliveryError(.retryable, "HTTP 503"))
        XCTAssertEqual(down?.outcome, .queued)
        try store.exec("DELETE FROM delivery WHERE status = 'pending'")
        let gone = try await failing(DeliveryError(.gone, "HTTP 410"))
        XCTAssertEqual(gone?.outcome, .sinkDisabled)
    }

    /// Issue 9, item 1, at the source: an item nesting ~509 levels deep was stored, and its
    /// `changed` event (old and new data one level further down, under `changes`) was
    /// written as `{}`. Items are cut to size when taken in, so every event reads back and
    /// is delivered, with a visible marker.
    func testDeeplyNestedItemsAreCutWhenTakenInAndTheirEventsDelivered() async throws {
        func deep(_ depth: Int, leaf: JSONValue) -> JSONValue {
            var v = leaf
            for _ in 0..<depth { v = ["a": v] }
            return v
        }
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let t0 = Date()
        let first = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "d", kind: "k", title: "deep", data: deep(509, leaf: 1))]), now: t0, options: route)
        XCTAssertEqual(
            first.warnings, ["cut 1 item to size (key 'd': data nested deeper than 64 levels); the stored item and its events carry a visible marker"])
        let changed = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "d", kind: "k", title: "deep", data: deep(509, leaf: 2))]), now: t0, options: route)
        let later = try await rec.recordSuccess(
            source, result: .snapshot([Item(key: "d", kind: "k", title: "deep", data: deep(509, leaf: 2)), Item(key: "n", kind: "k", title: "next")]), now: t0,
            options: route)
        XCTAssertEqual(later.warnings, [], "an unchanged item cut the same way is not reported again")
        let payloads: [String] = try store.column("SELECT payload FROM event ORDER BY seq")
        XCTAssertEqual(payloads.count, 2)
        for p in payloads { XCTAssertNoThrow(try Event.decode(jsonLine: p), String(p.prefix(200))) }
        XCTAssertTrue(payloads[0].contains("nested deeper than 64 levels; cut by tidings"), String(payloads[0].prefix(300)))
        let sink = ScriptedSink()
        _ = await OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(), env: FixedEnvironment(time: t0), logger: quietLogger).drainOnce()
        XCTAssertEqual(sink.delivered, (changed.events + later.events).map(\.id))
    }

    /// Issue 9, item 13: a poll with more events than `max_events` records the state in full
    /// but sends one summary event (counted by type) and says so once.
    func testMaxEventsSendsOneSummaryInstead() throws {
        var capped = source
        capped.settings.maxEvents = 3
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let items = (0..<5).map { Item(key: "\($0)", kind: "alert", title: "a\($0)", severity: $0 == 4 ? .critical : .info) }
        _ = try rec.recordSuccess(capped, result: .snapshot([items[0]]), now: Date(), options: route)
        let r = try rec.recordSuccess(capped, result: .snapshot(Array(items[1...])), now: Date(), options: route)
        XCTAssertEqual(r.events.count, 1)
        let summary = r.events[0]
        XCTAssertEqual(summary.title, "s: 5 events in one poll (4 new, 1 removed), over max_events = 3")
        XCTAssertEqual(summary.data["summary"]?["by_type"], ["new": 4, "removed": 1])
        XCTAssertEqual(summary.data["summary"]?["events"], 5)
        XCTAssertEqual(summary.kind, "alert", "the kind they share")
        XCTAssertEqual(summary.event, .changed, "new and removed: changed")
        XCTAssertEqual(summary.severity, .critical, "the highest")
        XCTAssertEqual(r.warnings, [summary.title + "; recorded the state and sent one summary event instead"])
        XCTAssertEqual(try count("event"), 1)
        XCTAssertEqual(try count("delivery"), 1)
        let next = try rec.recordSuccess(
            capped, result: .snapshot(Array(items[1...]) + [Item(key: "9", kind: "alert", title: "nine")]), now: Date(), options: route)
        XCTAssertEqual(next.events.map(\.key), ["9"], "the state was recorded: the next poll is normal")
        XCTAssertEqual(next.warnings, [])
    }

    /// Issue 9, item 16: a state migrated by a newer tidings is refused, naming the file.
    func testStateFromANewerVersionIsRefused() throws {
        let store = try StateStore.open(directory: dir, logger: quietLogger)
        try store.exec("INSERT INTO grdb_migrations(identifier) VALUES ('v99-from-the-future')")
        XCTAssertThrowsError(try StateStore.open(directory: dir, logger: quietLogger)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("\(self.dir)/tidings.sqlite"), text)
            XCTAssertTrue(text.contains("v99-from-the-future"), text)
            XCTAssertTrue(text.contains("newer version of tidings"), text)
        }
    }

    /// Issue 9, item 19: `tidings items` shows the latest poll's text, also when a custom
    /// fingerprint (an exec `fingerprint`, a Nagios state) did not change.
    func testCurrentItemsShowTheLatestText() throws {
        let rec = PollRecorder(store: store)
        let opts = RecordOptions(router: nil)
        func check(_ title: String, _ body: String) -> Item { Item(key: "disk", kind: "check", title: title, body: body, fingerprint: "WARNING") }
        _ = try rec.recordSuccess(source, result: .snapshot([check("DISK WARNING - 91%", "/var")]), now: Date(), options: opts)
        let r = try rec.recordSuccess(source, result: .snapshot([check("DISK WARNING - 97%", "/var and /home")]), now: Date(), options: opts)
        XCTAssertEqual(r.events.count, 0)
        let shown = try store.currentItems(source: "s").map { "\($0.item.title) | \($0.item.body)" }
        XCTAssertEqual(shown, ["DISK WARNING - 97% | /var and /home"])
    }

    func testRetryableDeliveryGivesUpAfterMaxAge() async throws {
        let rec = PollRecorder(store: store)
        let route = RecordOptions(router: Router(routes: [], allSinks: ["x"]))
        let t0 = Date()
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: t0, options: route)
        _ = try await rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "a")]), now: t0, options: route)
        let sink = ScriptedSink()
        sink.failures = Array(repeating: DeliveryError(.retryable, "down"), count: 10)
        let env = FixedEnvironment(time: t0 + 101)
        let worker = OutboxWorker(store: store, sinks: ["x": sink], policy: RetryPolicy(maxAge: 100), env: env, logger: quietLogger)
        _ = await worker.drainOnce()
        let row = try XCTUnwrap(try store.rows("SELECT status, attempts, last_error FROM delivery").first)
        XCTAssertEqual(try row[0] as String, "dead")
        let error: String = try row[2]
        XCTAssertTrue(error.hasPrefix("gave up after 1 attempts"), error)
    }

    func testCorruptDatabaseIsMovedAsideAndStartsFresh() throws {
        let d = try scratchDirectory()
        try write(String(repeating: "this is not sqlite ", count: 500), to: "\(d)/tidings.sqlite")
        let s = try StateStore.open(directory: d, logger: quietLogger)
        XCTAssertEqual(try s.scalar("SELECT count(*) FROM item") as Int?, 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: d)
        XCTAssertTrue(names.contains { $0.hasPrefix("tidings.sqlite.corrupt-") }, "\(names)")
    }

    func testPruneKeepsEventsThatStillNeedDelivery() throws {
        let rec = PollRecorder(store: store)
        let old = Date().addingTimeInterval(-40 * 86_400)
        _ = try rec.recordSuccess(source, result: .snapshot([]), now: old, options: RecordOptions(router: nil))
        _ = try rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "a")]), now: old, options: RecordOptions(router: nil))
        _ = try rec.recordSuccess(
            source, result: .snapshot([Item(key: "1", kind: "k", title: "a"), Item(key: "2", kind: "k", title: "b")]), now: old,
            options: RecordOptions(router: Router(routes: [], allSinks: ["x"])))
        let r = try store.prune(olderThanDays: 30)
        XCTAssertEqual(r.events, 1)
        XCTAssertEqual(try count("event"), 1, "the undelivered event stays")
    }

    /// Dead letters were never pruned and kept their events, so a sink that failed for good
    /// grew the state without limit (issue 20, item 17): after `dead_letter_days` they go, with
    /// their events once those are past `history_days`; younger ones and pending rows stay.
    func testDeadLettersArePrunedAfterTheirAgeWithTheirEvents() async throws {
        let rec = PollRecorder(store: store)
        let old = Date().addingTimeInterval(-40 * 86_400)
        let router = Router(routes: [], allSinks: ["gone", "live"])
        _ = try await rec.recordSuccess(source, result: .snapshot([]), now: old, options: RecordOptions(router: nil))
        _ = try await rec.recordSuccess(source, result: .snapshot([Item(key: "1", kind: "k", title: "a")]), now: old, options: RecordOptions(router: router))
        try store.exec("UPDATE delivery SET status = 'dead' WHERE sink = 'gone'")
        XCTAssertEqual(try count("delivery"), 2)

        var r = try store.prune(olderThanDays: 30, deadLetterDays: 60)
        XCTAssertEqual(r.deadLetters, [:], "younger than dead_letter_days")
        XCTAssertEqual(try count("delivery"), 2)

        r = try await store.pruneInBackground(olderThanDays: 30, deadLetterDays: 30)
        XCTAssertEqual(r.deadLetters, ["gone": 1])
        XCTAssertEqual(r.events, 0, "the event is still pending for sink live")
        XCTAssertEqual(try count("delivery"), 1)
        try store.exec("UPDATE delivery SET status = 'dead'")
        r = try store.prune(olderThanDays: 30, deadLetterDays: 30)
        XCTAssertEqual(r.deadLetters, ["live": 1])
        XCTAssertEqual(r.events, 1, "no delivery needs the event any more: it goes with the dead letters")
        XCTAssertEqual(try count("event"), 0)
    }

    func testForgetDropsItemsStatusAndNotices() throws {
        let rec = PollRecorder(store: store)
        _ = try rec.recordSuccess(source, result: .snapshot([]), now: Date(), options: RecordOptions(router: nil))
        _ = try rec.recordSuccess(
            source, result: .snapshot([Item(key: "n", kind: "notice", title: "maintenance")]), now: Date(), options: RecordOptions(router: nil))
        XCTAssertEqual(try count("notice"), 1)
        XCTAssertEqual(try store.forget(source: "s"), 1)
        XCTAssertEqual(try count("notice"), 0)
        XCTAssertEqual(try count("item"), 0)
        XCTAssertEqual(try count("source_state"), 0)
        XCTAssertEqual(try count("event"), 1, "history stays")
    }

    func testConcurrentOpensOfAFreshFileAllSucceed() async throws {
        // The daemon and a CLI command may create the database at the same moment.
        for _ in 0..<5 {
            let d = try scratchDirectory()
            let ok = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<4 {
                    group.addTask { (try? StateStore.open(directory: d, logger: quietLogger)) != nil }
                }
                var all = true
                for await r in group { all = all && r }
                return all
            }
            XCTAssertTrue(ok)
        }
    }
}

/// A state database that cannot be read must fail the poll (and so `check`'s exit status),
/// without polling blind: the source might be waiting after rejected credentials.
final class PollRunnerStateErrorTests: XCTestCase {
    func testAnUnreadableStateFailsThePollWithoutPolling() async throws {
        let store = try makeTestStore()
        let provider = CountingProvider()
        let source = SourceConfig(
            name: "s", provider: "counting", settings: SourceSettings(), flapWindow: 0, instance: provider,
            file: "t", line: nil, configHash: "h")
        try store.exec("ALTER TABLE source_state RENAME COLUMN etag TO etag_gone")
        let outcome = await PollRunner(store: store, http: CurlHTTPClient()).poll(source, options: RecordOptions(router: nil), logger: quietLogger)
        XCTAssertEqual(provider.count, 0, "not polled blind")
        XCTAssertTrue(outcome.error?.message.contains("could not read the state database") == true, "\(String(describing: outcome.error))")
    }
}
