import CSQLite
import Glibc
import Synchronization
import TidingsEngine
import TidingsPluginAPI

/// The SQLite ``StateDatabase``: one file in the state directory, in WAL mode (readers never
/// wait for the writer), on SQLite's C API: one writer connection, read-only reader
/// connections, a statement cache on each.
///
/// From async code nothing waits for a lock on the cooperative thread pool:
/// - Reads run in place: in WAL mode a read waits for nobody, and a hop to another thread
///   costs more than the read (benchmark 2). A read takes an idle reader connection, or opens one.
/// - A write runs in place when it can start at once: no other write of this process is under
///   way (the writer connection is free, so taking it does not wait) and SQLite's write lock
///   is free (`BEGIN IMMEDIATE` tried with no busy timeout). Otherwise (a `tidings` command is
///   writing, or another poll's commit is) it waits on the writer thread, off the pool, one
///   write after the other as GRDB's writer queue did. The lock is almost always free.
/// - A poll's write (``performGrouped(order:_:)``) runs in place in the same way when it can;
///   else it joins the polls queued for the writer thread, which commits up to 64 of them in
///   one transaction, each in a savepoint (group commit, ``GroupCommit``): one COMMIT, and
///   the pages they share written to the WAL once.
package final class SQLiteStateDatabase: StateDatabase {
    package let path: String
    package var location: String { path }
    package var dialect: SQLDialect { .sqlite }
    /// One daemon per file (``StateLock``).
    package var isShared: Bool { false }
    /// How long a statement waits for another process's lock, in seconds.
    private let busyTimeout: Double
    /// The one writer connection; whoever holds the lock uses it.
    private let writer: SQLiteConnection
    private let writerLock = Mutex(())
    /// Reader connections not in use.
    private let idleReaders = Mutex<[SQLiteConnection]>([])
    /// Idle readers kept open (GRDB's pool kept 5).
    private static let maximumIdleReaders = 5
    /// Writes of this process under way or waiting for the writer: one runs in place only when there are none.
    private let writes = Mutex(0)
    /// Writes that could not start at once, run one after the other on the writer thread.
    private let queue: WriteQueue
    /// Poll writes waiting for the writer thread, committed in batches (its tally: tests, figures).
    package let group = GroupCommit()

    /// Loads libsqlite3 now rather than with the first connection: thread-safe, once per
    /// process (what ``init(path:busyTimeout:writerLinger:)`` does first; a failure is its error).
    package static func loadLibrary() { _ = tidings_sqlite3_load() }

    /// Opens (or creates) the file, switches it to WAL and makes sure a WAL file exists with
    /// something in it (GRDB's fix for read-only readers on a fresh file). `writerLinger`: how
    /// long the writer thread waits for another write before it ends (tests set it).
    package init(path: String, busyTimeout: Double, writerLinger: Duration = .milliseconds(20)) throws {
        self.path = path
        self.busyTimeout = busyTimeout
        queue = WriteQueue(linger: writerLinger)
        writer = try SQLiteConnection(path: path, readOnly: false, busyTimeout: busyTimeout)
        let mode: String? = try SQLiteStatements(connection: writer).scalar("PRAGMA journal_mode = WAL")
        guard mode == "wal" else { throw SQLiteError(extendedCode: SQLITE_ERROR, message: "could not activate WAL Mode at path: \(path)", sql: nil) }
        var st = stat()
        if stat(path + "-wal", &st) != 0 || st.st_size == 0 {
            try writer.inTransaction("BEGIN IMMEDIATE") {
                try writer.execute("CREATE TABLE grdb_issue_102 (id INTEGER PRIMARY KEY); DROP TABLE grdb_issue_102")
            }
        }
    }

    /// The writer connection, outside any transaction: opening (migrations) and hand edits in tests.
    func withWriter<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        var result: Result<T, any Error>?
        counted {
            writerLock.withLock { _ in result = Result { try body(writer) } }
        }
        return try result!.get()
    }

    /// Statements outside a transaction on the writer connection (a `PRAGMA foreign_keys`
    /// between them holds): for tests that edit the file by hand.
    package func withoutTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try withWriter { try body(SQLiteStatements(connection: $0)) }
    }

    /// One write transaction on the writer connection, waiting for the writer and for SQLite's lock.
    private func writeTransaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        try withWriter { connection in
            try connection.inTransaction("BEGIN IMMEDIATE", commit: kind == .write) { try body(SQLiteStatements(connection: connection)) }
        }
    }

    private func readTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        let reader = try idleReaders.withLock { $0.popLast() } ?? SQLiteConnection(path: path, readOnly: true, busyTimeout: busyTimeout)
        defer {
            idleReaders.withLock { idle in
                if idle.count < Self.maximumIdleReaders && !reader.isInsideTransaction { idle.append(reader) }
            }
        }
        return try reader.inTransaction("BEGIN DEFERRED", commit: true) { try body(SQLiteStatements(connection: reader)) }
    }

    /// A write attempted in place: done, or it would have had to wait.
    private enum Attempt<T> {
        case done(T)
        case wouldWait
    }

    /// Runs `body` as one transaction on the calling thread if that needs no waiting; else `.wouldWait`, and nothing ran.
    private func attemptInPlace<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> Attempt<T> {
        guard
            writes.withLock({ (n: inout Int) -> Bool in
                guard n == 0 else { return false }
                n = 1
                return true
            })
        else { return .wouldWait }
        defer { writes.withLock { $0 -= 1 } }
        var attempt: Result<Attempt<T>, any Error> = .success(.wouldWait)
        writerLock.withLockIfAvailable { _ in
            attempt = Result {
                writer.setBusyTimeout(0)
                let began = Result { try writer.execute("BEGIN IMMEDIATE") }
                writer.setBusyTimeout(busyTimeout)
                if case .failure(let error as SQLiteError) = began, error.isBusy { return .wouldWait }
                try began.get()
                // The write lock is held: nothing below waits for another connection.
                do {
                    let result = try body(SQLiteStatements(connection: writer))
                    try writer.execute(kind == .dryRun ? "ROLLBACK" : "COMMIT")
                    return .done(result)
                } catch {
                    if writer.isInsideTransaction { try? writer.execute("ROLLBACK") }
                    throw error
                }
            }
        }
        return try attempt.get()
    }

    /// Counts a write while it runs or waits for the writer, so that none runs in place meanwhile.
    private func counted<T>(_ body: () throws -> T) rethrows -> T {
        writes.withLock { $0 += 1 }
        defer { writes.withLock { $0 -= 1 } }
        return try body()
    }

    package func transaction<T>(_ kind: TransactionKind, _ body: (any SQLConnection) throws -> T) throws -> T {
        kind == .read ? try readTransaction(body) : try writeTransaction(kind, body)
    }

    package func perform<T: Sendable>(_ kind: TransactionKind, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        if kind == .read { return try readTransaction(body) }
        if case .done(let result) = try attemptInPlace(kind, body) { return result }
        writes.withLock { $0 += 1 }
        defer { writes.withLock { $0 -= 1 } }
        return try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            queue.enqueue { done.resume(with: Result { try self.writeTransaction(kind, body) }) }
        }
    }

    package func performGrouped<T: Sendable>(order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        // Nothing under way: committed alone, at once (a batch of one).
        if case .done(let result) = try attemptInPlace(.write, body) { return result }
        writes.withLock { $0 += 1 }
        defer { writes.withLock { $0 -= 1 } }
        return try await group.perform(
            order: order, body,
            schedule: {
                queue.enqueue { self.group.runPending { batch in try self.writeTransaction(.write, batch) } }
                return true
            }, refused: SQLiteError(extendedCode: SQLITE_MISUSE, message: "the state database is closed", sql: nil))
    }

    package func close() async {}
}

/// Jobs run one after the other on a thread of their own, started when a job arrives and
/// none is running (GRDB's writer queue, without Dispatch). Once none is left the thread waits
/// `linger` (20 ms) for another before it ends: polls that finish a few milliseconds apart (a
/// `check` of 200 sources, a busy daemon) are written by one thread instead of one thread
/// each (39 thread starts in benchmark 1's `check`), and an idle daemon keeps no thread.
private final class WriteQueue: @unchecked Sendable {
    /// How long a thread with nothing left to write waits for another job before it ends (ns).
    private let linger: Int

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let arrived = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // All below under `mutex`.
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    /// A thread is draining the queue (or waiting, lingering, for more).
    private var running = false
    private var lingering = false

    init(linger: Duration) {
        self.linger = Int(linger.components.seconds) * 1_000_000_000 + Int(linger.components.attoseconds / 1_000_000_000)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(arrived, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Only once no thread runs: the thread holds `self` until it ends.
    deinit {
        pthread_cond_destroy(arrived)
        pthread_mutex_destroy(mutex)
        arrived.deallocate()
        mutex.deallocate()
    }

    func enqueue(_ job: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        let start = !running
        if start {
            running = true
        } else if lingering {
            pthread_cond_signal(arrived)
        }
        pthread_mutex_unlock(mutex)
        guard start else { return }
        // No thread to be had: the job runs here, on the pool, rather than never (and the
        // pool thread does not linger).
        if !startDetachedThread(name: "tidings-sqlite", { self.drain(lingering: true) }) { drain(lingering: false) }
    }

    private func drain(lingering mayLinger: Bool) {
        pthread_mutex_lock(mutex)
        while true {
            if next < jobs.count {
                let job = jobs[next]
                next += 1
                pthread_mutex_unlock(mutex)
                job()
                pthread_mutex_lock(mutex)
                continue
            }
            jobs.removeAll()
            next = 0
            if mayLinger && waitForJob() { continue }
            running = false
            pthread_mutex_unlock(mutex)
            return
        }
    }

    /// Under `mutex`, the queue empty: waits up to `linger` for a job; whether one came.
    private func waitForJob() -> Bool {
        var until = timespec()
        clock_gettime(CLOCK_MONOTONIC, &until)
        let nanoseconds = until.tv_nsec + linger
        until.tv_sec += nanoseconds / 1_000_000_000
        until.tv_nsec = nanoseconds % 1_000_000_000
        lingering = true
        defer { lingering = false }
        while jobs.isEmpty {
            if pthread_cond_timedwait(arrived, mutex, &until) == ETIMEDOUT { return !jobs.isEmpty }
        }
        return true
    }
}
