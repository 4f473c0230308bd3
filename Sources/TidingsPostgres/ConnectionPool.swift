import CLibPQ
import Glibc
import TidingsEngine
import TidingsPluginAPI

/// `size` libpq connections, each used by one transaction at a time. A transaction that finds
/// none free waits (on its own thread); a slot whose connection is missing or broken connects
/// anew.
final class ConnectionPool: @unchecked Sendable {
    private let gate = Gate()
    // Under `gate`:
    /// Free slots: a connection, or nil for one to (re)connect.
    private var free: [PQConnection?]
    private var closed = false

    private let parameters: [(String, String)]
    private let location: String
    private let timeout: Int

    /// Loads libpq (the first pool of the process: it is not linked, DESIGN §15; missing, the
    /// state cannot open, as when the server is unreachable, and the error names libpq5), checks
    /// that it reads the URL (an unknown parameter, a malformed URL: libpq's words; the app's
    /// message adds the config line); connects nothing yet.
    init(_ settings: StateSettings) throws {
        location = settings.location
        if let missing = tidings_pq_load() {
            throw PostgresStateError(location: location, what: "cannot connect", reason: String(cString: missing))
        }
        if let problem = conninfoProblem(settings.url?.absoluteString ?? "") {
            throw PostgresStateError(location: location, what: "libpq cannot read the URL", reason: problem)
        }
        parameters = connectionParameters(settings)
        timeout = connectTimeoutSeconds(settings)
        free = Array(repeating: nil, count: max(1, settings.poolSize))
    }

    func acquire() throws -> PQConnection {
        let slot: PQConnection?? = gate.locked {
            while free.isEmpty && !closed { gate.wait() }
            if closed { return .none }
            // The most recently used live connection first; a dead one is dropped.
            return .some(free.remove(at: free.lastIndex { $0 != nil } ?? free.count - 1))
        }
        guard let slot else {
            throw PostgresStateError(location: location, what: "cannot start a transaction", reason: "the database was closed")
        }
        if let slot, !slot.isBroken { return slot }
        do {
            let connection = try PQConnection.connect(parameters, location: location, timeout: timeout)
            try connection.setStatementTimeout(PostgresStateDatabase.serverStatementTimeout)
            return connection
        } catch {
            release(nil, healthy: false)
            throw error
        }
    }

    /// Gives a slot back; an unhealthy connection is dropped (closed) and its slot reconnects
    /// on next use.
    func release(_ connection: PQConnection?, healthy: Bool) {
        gate.locked {
            if !closed { free.append(healthy ? connection : nil) }
            gate.signal()
        }
    }

    /// Closes the idle connections; one in use is closed when it comes back.
    func close() {
        let idle = gate.locked {
            closed = true
            let all = free
            free = []
            gate.broadcast()
            return all
        }
        withExtendedLifetime(idle) {}
    }
}

/// `count` threads that run submitted jobs in order: where ``PostgresStateDatabase/perform(_:_:)``
/// runs its blocking transactions, off the cooperative pool.
final class WorkerThreads: @unchecked Sendable {
    private let gate = Gate()
    // Under `gate`:
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var stopped = false

    init(count: Int, name: String) {
        for i in 0..<count {
            startDetachedThread(name: "\(name)-\(i)") { [self] in
                while let job = next() { job() }
            }
        }
    }

    /// False once stopped (the job never runs).
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        gate.locked {
            guard !stopped else { return false }
            jobs.append(job)
            gate.signal()
            return true
        }
    }

    /// The threads finish the jobs already submitted, then end.
    func stop() {
        gate.locked {
            stopped = true
            gate.broadcast()
        }
    }

    private func next() -> (@Sendable () -> Void)? {
        gate.locked {
            while head == jobs.count && !stopped { gate.wait() }
            guard head < jobs.count else { return nil }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            return job
        }
    }
}

/// A mutex and its condition variable (a thread waits for a free connection or a job).
final class Gate: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside ``locked(_:)`` only.
    func wait() { pthread_cond_wait(condition, mutex) }
    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }
}
