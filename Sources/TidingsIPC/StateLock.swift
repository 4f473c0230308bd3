import FoundationEssentials
import TidingsPluginAPI

#if canImport(Glibc)
    import Glibc
#endif

/// The lock on a state directory (DESIGN §7): the file `tidings.lock` in it, locked with
/// flock(2) (not the SQLite file, whose locks SQLite manages itself).
///
/// `tidings run` holds it exclusively for its whole life and writes its PID into it;
/// `tidings check` working on the state directly holds it shared, so a daemon that starts
/// meanwhile waits for the check instead of polling beside it. The kernel drops a lock
/// when its process ends, even by kill -9: a lock file left behind never wedges anything.
/// The file itself is never removed (that would let two processes lock two files).
package final class StateLock: Sendable {
    package static let fileName = "tidings.lock"

    /// What a daemon found.
    package enum Claim: Sendable {
        /// Locked exclusively, this process's PID written: the state is the daemon's.
        case owned(StateLock)
        /// Another daemon holds it, with its PID once it has written it.
        case heldByDaemon(pid: Int32?)
        /// One or more `tidings check` work on the state directly (shared locks).
        case heldByChecks
    }

    /// What a check found.
    package enum Share: Sendable {
        /// Locked shared, beside other checks: no daemon holds the state.
        case shared(StateLock)
        /// A daemon holds it, with its PID once it has written it.
        case heldByDaemon(pid: Int32?)
    }

    package let path: String
    private let fd: Int32

    /// Opens (creating if needed) the lock file of `directory`, not yet locked.
    private init(directory: String, writable: Bool) throws(SystemFailure) {
        path = Self.path(in: directory)
        fd = try Self.open(path, directory: directory, writable: writable)
    }

    deinit { Glibc.close(fd) }

    package static func path(in directory: String) -> String { "\(directory)/\(fileName)" }

    /// For `tidings run`: tries once, without waiting, to lock exclusively. Creates the
    /// directory (0700) and the lock file (0600) if needed, and writes this process's PID.
    package static func claim(directory: String) throws(SystemFailure) -> Claim {
        let lock = try StateLock(directory: directory, writable: true)
        if flock(lock.fd, LOCK_EX | LOCK_NB) == 0 {
            let pid = "\(getpid())\n"
            guard ftruncate(lock.fd, 0) == 0, pwrite(lock.fd, pid, pid.utf8.count, 0) == pid.utf8.count else {
                throw SystemFailure("cannot write \(lock.path)", errno: errno)
            }
            return .owned(lock)
        }
        guard errno == EWOULDBLOCK else { throw SystemFailure("cannot lock \(lock.path)", errno: errno) }
        // Shared holders only (checks), or a daemon? A shared lock tells them apart; it goes
        // with `lock` on return.
        if flock(lock.fd, LOCK_SH | LOCK_NB) == 0 { return .heldByChecks }
        return .heldByDaemon(pid: lock.recordedPID())
    }

    /// For `tidings check`: tries once, without waiting, to lock shared.
    package static func share(directory: String) throws(SystemFailure) -> Share {
        let lock = try StateLock(directory: directory, writable: false)
        if flock(lock.fd, LOCK_SH | LOCK_NB) == 0 { return .shared(lock) }
        guard errno == EWOULDBLOCK else { throw SystemFailure("cannot lock \(lock.path)", errno: errno) }
        return .heldByDaemon(pid: lock.recordedPID())
    }

    /// What `tidings status` found: never creates the directory or the lock file, and holds
    /// nothing once it returns.
    package enum Probe: Sendable, Equatable {
        /// No lock file: no daemon has ever run on this state directory (or it is missing).
        case noLockFile
        /// Nobody holds it exclusively: no daemon (checks may hold it shared).
        case free
        /// A daemon holds it: its PID once written, and since when (the lock file's
        /// modification time: the daemon writes its PID into it right after locking).
        case heldByDaemon(pid: Int32?, since: Date?)
    }

    /// Looks, without waiting, whether a daemon holds the lock of `directory`. A shared lock is
    /// taken and dropped at once: a daemon starting in that instant waits 100 ms for it, as it
    /// waits for a check.
    package static func probe(directory: String) throws(SystemFailure) -> Probe {
        let path = Self.path(in: directory)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return .noLockFile }
            throw SystemFailure("cannot open \(path)", errno: errno)
        }
        defer { Glibc.close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return .free
        }
        guard errno == EWOULDBLOCK else { throw SystemFailure("cannot lock \(path)", errno: errno) }
        var st = stat()
        let since = fstat(fd, &st) == 0 ? Date(timeIntervalSince1970: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9) : nil
        return .heldByDaemon(pid: readPID(fd), since: since)
    }

    /// The PID the daemon wrote; nil if it has not written it yet (it writes right after locking).
    private func recordedPID() -> Int32? { Self.readPID(fd) }

    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: bytes[..<n], as: UTF8.self).trimmed())
    }

    private static func open(_ path: String, directory: String, writable: Bool) throws(SystemFailure) -> Int32 {
        if let failure = makeDirectories(directory, mode: 0o700) {
            throw SystemFailure("cannot create the state directory \(directory): cannot create \(failure.path)", errno: failure.errno)
        }
        // O_NOFOLLOW: a symlink planted in place of the lock file is refused, not followed and truncated.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { return fd }
        let code = errno
        // A check may lock a state it can only read (its writes then fail as state errors).
        if !writable, code == EACCES || code == EROFS {
            let ro = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if ro >= 0 { return ro }
        }
        if code == EACCES || code == EROFS { throw SystemFailure("cannot write the state directory \(directory)", errno: code) }
        throw SystemFailure("cannot open \(path)", errno: code)
    }
}
