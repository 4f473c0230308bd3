import FoundationEssentials
import Glibc
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// How the SQLite backend runs writes from async code: in place when nothing is in the way,
/// else on the writer thread, never waiting for a lock on the cooperative thread pool.
final class SQLiteWriteTests: XCTestCase {
    private func store() throws -> (StateStore, String) {
        let path = try scratchDirectory() + "/tidings.sqlite"
        let store = try StateStore(path: path)
        try store.database.write { _ = try $0.execute("CREATE TABLE scratch(x INTEGER)") }
        return (store, path)
    }

    private func count(_ store: StateStore) throws -> Int {
        try store.database.read { try $0.scalar("SELECT count(*) FROM scratch") } ?? -1
    }

    /// Another process holds SQLite's write lock: more writes wait than the pool has threads,
    /// and the pool still runs other work meanwhile (had they waited on it, the other work
    /// would run only once they gave up, after the 10 s busy timeout). When the lock is
    /// released, every write lands.
    func testWritesWaitingForAnotherProcessLeaveTheCooperativePoolFree() async throws {
        let (db, path) = try store()
        let other = try WriteLockHolder(path: path)
        let n = ProcessInfo.processInfo.activeProcessorCount * 2 + 2
        let finished = Counter()
        let writes = Task { [db] in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<n {
                    group.addTask {
                        defer { finished.add() }
                        try await db.database.write { _ = try $0.execute("INSERT INTO scratch(x) VALUES (?)", i) }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        // Needs a free thread of the cooperative pool.
        let finishedWhenOtherWorkRan = await Task.detached { finished.value }.value
        XCTAssertEqual(finishedWhenOtherWorkRan, 0, "the waiting writes held the cooperative pool")
        try other.release()
        try await writes.value
        XCTAssertEqual(try count(db), n)
    }

    /// The in-place path keeps the transaction rules: a dry run and a body that throws change
    /// nothing, a write commits once.
    func testAWriteInPlaceCommitsOrRollsBackAsAQueuedOneDoes() async throws {
        let (store, _) = try store()
        let dry = try await store.database.perform(.dryRun) { db -> Int in
            _ = try db.execute("INSERT INTO scratch(x) VALUES (1)")
            return try db.scalar("SELECT count(*) FROM scratch") ?? 0
        }
        XCTAssertEqual(dry, 1, "the dry run sees its own write")
        XCTAssertEqual(try count(store), 0)
        struct Refused: Error {}
        do {
            try await store.database.write { db in
                _ = try db.execute("INSERT INTO scratch(x) VALUES (2)")
                throw Refused()
            }
            XCTFail("the body threw")
        } catch is Refused {}
        XCTAssertEqual(try count(store), 0)
        try await store.database.write { _ = try $0.execute("INSERT INTO scratch(x) VALUES (3)") }
        XCTAssertEqual(try count(store), 1)
        // The connection's busy timeout is back after the attempt in place: a write waits for
        // another process's lock instead of failing at once.
        let other = try WriteLockHolder(path: store.path)
        startDetachedThread(name: "release") {
            usleep(200_000)
            try? other.release()
        }
        try Self.insertWaiting(store, 4)
        XCTAssertEqual(try count(store), 2)
    }

    /// Reads have connections of their own (WAL readers): one made while this process's write is
    /// under way neither waits for the writer nor sees the uncommitted rows, and then sees them
    /// once committed.
    func testAReadDuringAWriteSeesTheLastCommitWithoutWaiting() throws {
        let (store, _) = try store()
        try store.database.write { db in
            _ = try db.execute("INSERT INTO scratch(x) VALUES (1)")
            XCTAssertEqual(try db.scalar("SELECT count(*) FROM scratch"), 1, "the write sees its own row")
            XCTAssertEqual(try count(store), 0, "a read sees the last commit")
        }
        XCTAssertEqual(try count(store), 1)
    }

    // MARK: Group commit

    /// Poll writes that queue while the writer is busy are committed together: 20 of them
    /// behind a busy writer make at most 2 commits (the first batch may be taken before the
    /// others queue), and every write lands, its caller resumed with its own value.
    func testWritesQueuedBehindABusyWriterCommitInFewBatches() async throws {
        let (store, _) = try store()
        let sqlite = try XCTUnwrap(store.database as? SQLiteStateDatabase)
        let n = 20
        let values = try await whileWriterBusy(sqlite, writes: n) { i, db in
            _ = try db.execute("INSERT INTO scratch(x) VALUES (?)", i)
            return i
        }
        XCTAssertEqual(values.compactMap { try? $0.get() }.sorted(), Array(0..<n))
        XCTAssertEqual(try count(store), n)
        let tally = sqlite.group.tally
        XCTAssertEqual(tally.writes, n)
        XCTAssertLessThanOrEqual(tally.commits, 2, "one transaction per batch, not per write")
        XCTAssertEqual(sqlite.group.unfinished, 0)
    }

    /// Writes that queue a few milliseconds apart (polls finishing one after the other) are
    /// written by one thread, not one thread each; that thread ends once no write has come for
    /// its linger, so an idle process keeps none.
    func testTheWriterThreadWritesBurstsThatComeCloseTogetherThenEnds() async throws {
        let dir = try scratchDirectory()
        let lingering = try SQLiteStateDatabase(path: dir + "/long.sqlite", busyTimeout: 10, writerLinger: .seconds(5))
        try lingering.transaction(.write) { _ = try $0.execute("CREATE TABLE scratch(x INTEGER)") }
        var writers = Set<String>()
        for round in 0..<3 {
            let results = try await whileWriterBusy(lingering, writes: 2) { i, db in
                _ = try db.execute("INSERT INTO scratch(x) VALUES (?)", round * 10 + i)
                return Self.currentThread()
            }
            for result in results { writers.insert(try result.get()) }
        }
        XCTAssertEqual(writers.count, 1, "three bursts, one writer thread: \(writers)")

        let short = try SQLiteStateDatabase(path: dir + "/short.sqlite", busyTimeout: 10, writerLinger: .milliseconds(50))
        try short.transaction(.write) { _ = try $0.execute("CREATE TABLE scratch(x INTEGER)") }
        let results = try await whileWriterBusy(short, writes: 2) { i, db in
            _ = try db.execute("INSERT INTO scratch(x) VALUES (?)", i)
            return Self.currentThread()
        }
        let thread = try XCTUnwrap(results.first).get()
        var gone = false
        for _ in 0..<1000 where !gone {
            gone = access("/proc/self/task/\(thread)", F_OK) != 0
            if !gone { try await Task.sleep(for: .milliseconds(10)) }
        }
        XCTAssertTrue(gone, "the writer thread \(thread) still runs 10 s after its last write")
    }

    /// This thread's id, from /proc/thread-self ("PID/task/TID").
    private static func currentThread() -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &buffer, buffer.count - 1)
        guard n > 0 else { return "?" }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self).split(separator: "/").last.map(String.init) ?? "?"
    }

    /// A write whose body throws, or whose statement fails, is rolled back to its savepoint and
    /// fails alone with its own error; the others of its batch are committed.
    func testAFailingWriteInABatchFailsAloneAndTheOthersCommit() async throws {
        let (store, _) = try store()
        let sqlite = try XCTUnwrap(store.database as? SQLiteStateDatabase)
        try await store.database.write {
            _ = try $0.execute("CREATE UNIQUE INDEX scratch_x ON scratch(x)")
            _ = try $0.execute("INSERT INTO scratch(x) VALUES (-1)")
        }
        struct Refused: Error {}
        let n = 12
        let results = try await whileWriterBusy(sqlite, writes: n) { i, db in
            _ = try db.execute("INSERT INTO scratch(x) VALUES (?)", i)
            if i == 3 { throw Refused() }
            // A statement that fails: x = -1 is taken.
            if i == 7 { _ = try db.execute("INSERT INTO scratch(x) VALUES (-1)") }
            return i
        }
        XCTAssertTrue(results[3].isFailure { $0 is Refused }, "\(results[3])")
        XCTAssertTrue(results[7].isFailure { ($0 as? SQLiteError)?.code == 19 }, "SQLITE_CONSTRAINT: \(results[7])")
        let landed: [Int] = try await store.database.read { try $0.fetchAll("SELECT x FROM scratch ORDER BY x").map { try $0[0] } }
        XCTAssertEqual(landed, [-1] + (0..<n).filter { $0 != 3 && $0 != 7 }, "the failed writes left nothing, the others all landed")
        XCTAssertEqual(sqlite.group.tally.failedAlone, 2)
        XCTAssertLessThanOrEqual(sqlite.group.tally.commits, 2)
    }

    /// A write that ends the whole transaction (here its own ROLLBACK; a full disk does it too)
    /// fails alone: the writes before it in the batch run again in a fresh one and commit.
    func testAWriteThatEndsTheTransactionFailsAloneAndTheOthersRunAgain() async throws {
        let (store, _) = try store()
        let sqlite = try XCTUnwrap(store.database as? SQLiteStateDatabase)
        let runs = Mutex([Int: Int]())
        let n = 8
        let results = try await whileWriterBusy(sqlite, writes: n) { i, db in
            runs.withLock { $0[i, default: 0] += 1 }
            _ = try db.execute("INSERT INTO scratch(x) VALUES (?)", i)
            if i == 5 { _ = try db.execute("ROLLBACK") }
            return i
        }
        XCTAssertTrue(results[5].isFailure { _ in true })
        for i in 0..<n where i != 5 { XCTAssertEqual(try? results[i].get(), i) }
        let landed: [Int] = try await store.database.read { try $0.fetchAll("SELECT x FROM scratch ORDER BY x").map { try $0[0] } }
        XCTAssertEqual(landed, (0..<n).filter { $0 != 5 })
        XCTAssertTrue(runs.withLock { $0[0]! >= 1 && $0[6]! == 1 }, "the writes after the one that ended it ran once")
    }

    /// Runs `writes` grouped writes while a synchronous write (another thread) holds the writer,
    /// then lets it go: each write's result, by index (their order in a batch: the index's text).
    private func whileWriterBusy<T: Sendable>(
        _ db: SQLiteStateDatabase, writes n: Int, _ body: @escaping @Sendable (Int, any SQLConnection) throws -> T
    ) async throws -> [Result<T, any Error>] {
        let gate = Mutex(false)
        let holding = Mutex(false)
        startDetachedThread(name: "busy-writer") {
            try? db.transaction(.write) { _ in
                holding.withLock { $0 = true }
                while !gate.withLock({ $0 }) { usleep(1000) }
            }
        }
        while !holding.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        let results = startGroupedWrites(db, count: n, order: { String(repeating: "0", count: 3 - String($0).count) + String($0) }, body)
        while db.group.unfinished < n { try await Task.sleep(for: .milliseconds(1)) }
        gate.withLock { $0 = true }
        return await results.value
    }

    /// A write from synchronous code (the CLI's path).
    private static func insertWaiting(_ store: StateStore, _ x: Int) throws {
        try store.database.write { _ = try $0.execute("INSERT INTO scratch(x) VALUES (?)", x) }
    }
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// Another process's connection holding SQLite's write lock until ``release()``: a second
/// database on the file, its writer connection left inside `BEGIN IMMEDIATE`.
private final class WriteLockHolder: Sendable {
    let database: SQLiteStateDatabase

    init(path: String) throws {
        database = try SQLiteStateDatabase(path: path, busyTimeout: 10)
        try database.withoutTransaction { try $0.execute("BEGIN IMMEDIATE") }
    }

    func release() throws { try database.withoutTransaction { try $0.execute("COMMIT") } }
}
