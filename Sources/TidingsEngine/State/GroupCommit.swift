import Synchronization

/// Group commit (issue 33): writes that arrive while the state's writer is busy are committed
/// together, ONE transaction per batch, each write in a savepoint of its own.
///
/// - A write whose body throws is rolled back to its savepoint and fails alone, with its own
///   error; the others of its batch are committed.
/// - Every caller resumes only after the COMMIT that holds its write (or with the error that
///   kept it out): a poll's events are in the outbox before the poll counts as done, and a
///   crash before the COMMIT loses the whole batch, none of which any caller saw as recorded.
/// - An error that ends the whole transaction (SQLite rolls back on a full disk, PostgreSQL
///   loses its connection: the savepoint cannot be rolled back to) fails the write it hit; the
///   writes before it are run again in a fresh transaction, so a body may run more than once
///   (only its last run is committed: the bodies are transactions' bodies, nothing outside the
///   database sees them). A failed BEGIN or COMMIT fails every write of the batch.
/// - Batches form only while the writer is busy: a backend runs a write at once when it can
///   (``StateDatabase/performGrouped(order:_:)``), and a batch is whatever queued meanwhile,
///   up to ``maximumBatch``: no waiting is added when the writer is idle.
///
/// A backend queues writes here (``perform(order:_:schedule:)``), and on its writer thread
/// calls ``runPending(_:)`` once for each write it was asked to schedule.
package final class GroupCommit: Sendable {
    /// The most writes one transaction holds. (On PostgreSQL each write's savepoint that writes
    /// takes a subtransaction id; a transaction keeps 64 of them cached, beyond which every
    /// snapshot on the server pays.)
    package static let maximumBatch = 64

    /// One caller's write, waiting for its batch.
    final class Member: Sendable {
        /// Writes of one batch run in the order of this key (a poll's source), so that two
        /// transactions locking the same rows lock them in one order.
        let order: String
        let run: @Sendable (any SQLConnection) throws -> Void
        /// Resumes the caller: nil once its write is committed, else the error that kept it out.
        let finish: @Sendable ((any Error)?) -> Void
        init(order: String, run: @escaping @Sendable (any SQLConnection) throws -> Void, finish: @escaping @Sendable ((any Error)?) -> Void) {
            self.order = order
            self.run = run
            self.finish = finish
        }
    }

    /// A write's result, from the batch's thread to its caller (handed over by the resume).
    private final class Slot<T>: @unchecked Sendable {
        var value: T?
    }

    /// Commits and the writes they held (tests count batches with it; the daemon's figures).
    package struct Tally: Sendable, Equatable {
        /// Transactions committed by ``runPending(_:)``, each holding one batch.
        package var commits = 0
        /// Writes committed in them.
        package var writes = 0
        /// Writes that failed alone (their savepoint rolled back).
        package var failedAlone = 0
        package init(commits: Int = 0, writes: Int = 0, failedAlone: Int = 0) {
            self.commits = commits
            self.writes = writes
            self.failedAlone = failedAlone
        }
    }

    private let pending = Mutex<[Member]>([])
    private let counts = Mutex(Tally())

    package init() {}

    package var tally: Tally { counts.withLock { $0 } }

    /// Writes queued or in a batch, their callers not resumed yet.
    package var unfinished: Int { open.withLock { $0 } }
    private let open = Mutex(0)

    /// Queues `body` and calls `schedule`, which must see to it that ``runPending(_:)`` runs
    /// once (on the backend's writer), or return false (the backend is closed: the write fails
    /// with `refused` unless a batch took it meanwhile). Returns after the commit that holds it.
    package func perform<T: Sendable>(
        order: String, _ body: @escaping @Sendable (any SQLConnection) throws -> T,
        schedule: () -> Bool, refused: @autoclosure () -> any Error
    ) async throws -> T {
        let slot = Slot<T>()
        return try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            let member = Member(
                order: order, run: { slot.value = try body($0) },
                finish: { [self] error in
                    open.withLock { $0 -= 1 }
                    if let error { done.resume(throwing: error) } else { done.resume(returning: slot.value!) }
                })
            open.withLock { $0 += 1 }
            pending.withLock { $0.append(member) }
            guard !schedule() else { return }
            let mine = pending.withLock { p -> Bool in
                guard let i = p.firstIndex(where: { $0 === member }) else { return false }
                p.remove(at: i)
                return true
            }
            if mine { member.finish(refused()) }
        }
    }

    /// Takes the writes waiting (up to ``maximumBatch``, the oldest first) and commits them as
    /// one transaction: `transaction` opens one on the writer, runs its body in it and commits
    /// (it rolls back and throws when its body throws). Returns false if none was waiting
    /// (another run took them).
    @discardableResult
    package func runPending(_ transaction: (_ body: (any SQLConnection) throws -> Void) throws -> Void) -> Bool {
        let batch = pending.withLock { p -> [Member] in
            let n = min(p.count, Self.maximumBatch)
            defer { p.removeFirst(n) }
            return Array(p.prefix(n))
        }
        guard !batch.isEmpty else { return false }
        run(batch.sorted { $0.order.utf8.lexicographicallyPrecedes($1.order.utf8) }, transaction)
        return true
    }

    /// The transaction ended under the write at `index` (its savepoint could not be rolled back to).
    private struct Lost: Error {
        var index: Int
        var error: any Error
    }

    private func run(_ members: [Member], _ transaction: (_ body: (any SQLConnection) throws -> Void) throws -> Void) {
        var members = members
        while !members.isEmpty {
            // A write's own error: it was rolled back to its savepoint.
            var failed = [(any Error)?](repeating: nil, count: members.count)
            do {
                try transaction { db in
                    for (i, member) in members.enumerated() {
                        try db.savepoint(.begin)
                        do {
                            try member.run(db)
                            try db.savepoint(.release)
                        } catch {
                            failed[i] = error
                            do {
                                try db.savepoint(.rollback)
                                try db.savepoint(.release)
                            } catch {
                                throw Lost(index: i, error: failed[i]!)
                            }
                        }
                    }
                }
            } catch let lost as Lost {
                // Those that failed alone up to it stay failed; the one it hit fails; the rest
                // (those that ran well, and those that did not run) go again.
                var again: [Member] = []
                for (i, member) in members.enumerated() {
                    if i == lost.index {
                        member.finish(lost.error)
                    } else if i < lost.index, let error = failed[i] {
                        member.finish(error)
                    } else {
                        again.append(member)
                    }
                }
                counts.withLock { $0.failedAlone += members.count - again.count }
                members = again
                continue
            } catch {
                // BEGIN or COMMIT failed: nothing of the batch is recorded.
                for member in members { member.finish(error) }
                return
            }
            let alone = failed.filter { $0 != nil }.count
            counts.withLock {
                $0.commits += 1
                $0.writes += members.count - alone
                $0.failedAlone += alone
            }
            for (member, error) in zip(members, failed) { member.finish(error) }
            return
        }
    }
}

/// A step of a write's savepoint inside a group commit's transaction.
package enum SavepointStep: Sendable {
    case begin, release, rollback

    /// The statement, on both backends.
    package var sql: String {
        switch self {
        case .begin: "SAVEPOINT tidings_write"
        case .release: "RELEASE SAVEPOINT tidings_write"
        case .rollback: "ROLLBACK TO SAVEPOINT tidings_write"
        }
    }
}
