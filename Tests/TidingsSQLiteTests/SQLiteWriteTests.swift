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
