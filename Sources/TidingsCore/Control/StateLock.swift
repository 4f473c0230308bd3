import Foundation
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

    package enum Mode: Sendable { case exclusive, shared }

    /// Who holds the lock, when it could not be taken.
    package enum Holder: Sendable, Equatable {
        /// A daemon, with its PID once it has written it.
        case daemon(pid: Int32?)
        /// One or more `tidings check` working on the state directly.
        case checks
    }

    package enum Attempt: Sendable {
        case acquired(StateLock)
        case busy(Holder)
    }

    package let path: String
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    package static func path(in directory: String) -> String { "\(directory)/\(fileName)" }

    /// Tries once, without waiting. Creates the directory (0700) and the lock file (0600) if
    /// needed. An exclusive lock writes this process's PID into the file.
    package static func attempt(_ mode: Mode, directory: String) throws(SystemFailure) -> Attempt {
        let path = path(in: directory)
        let fd = try open(path, directory: directory, writable: mode == .exclusive)
        let lock = StateLock(path: path, fd: fd)
        switch mode {
        case .exclusive:
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                let pid = "\(getpid())\n"
                guard ftruncate(fd, 0) == 0, pwrite(fd, pid, pid.utf8.count, 0) == pid.utf8.count else {
                    throw SystemFailure("cannot write \(path)", errno: errno)
                }
                return .acquired(lock)
            }
            guard errno == EWOULDBLOCK else { throw SystemFailure("cannot lock \(path)", errno: errno) }
            // Shared holders only (checks), or a daemon? A shared lock tells them apart.
            if flock(fd, LOCK_SH | LOCK_NB) == 0 { return .busy(.checks) }  // (released with `lock`)
            return .busy(.daemon(pid: lock.recordedPID()))
        case .shared:
            if flock(fd, LOCK_SH | LOCK_NB) == 0 { return .acquired(lock) }
            guard errno == EWOULDBLOCK else { throw SystemFailure("cannot lock \(path)", errno: errno) }
            return .busy(.daemon(pid: lock.recordedPID()))
        }
    }

    /// The PID the daemon wrote; nil if it has not written it yet (it writes right after locking).
    private func recordedPID() -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: bytes[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private static func open(_ path: String, directory: String, writable: Bool) throws(SystemFailure) -> Int32 {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SystemFailure("cannot create the state directory \(directory): \(error.localizedDescription)")
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
