import FoundationEssentials
import TidingsPluginAPI

#if canImport(Glibc)
    import Glibc
#endif

/// A Unix stream socket with bounded, non-blocking I/O: every read and write waits with
/// poll(2) for at most a given time, so a hung or hostile peer costs a timeout, never a
/// blocked thread for ever. Blocking in the sense of poll(2): call it from a dedicated
/// thread, never from the Swift cooperative pool.
///
/// One owner at a time (the thread serving or using the connection).
package final class UnixSocket: @unchecked Sendable {
    package let fd: Int32
    private var buffer: [UInt8] = []
    private var closed = false

    private init(fd: Int32) { self.fd = fd }
    deinit { close() }

    /// What the kernel says about the process at the other end (SO_PEERCRED).
    package struct Peer: Sendable, Equatable {
        package var pid: Int32
        package var uid: uid_t
        package var gid: gid_t

        /// The control socket's rule, on both ends: the same user as this process, or root.
        package var isSameUserOrRoot: Bool { uid == getuid() || uid == 0 }
    }

    // MARK: setting up

    /// Binds and listens at `path`, replacing a stale socket file (the caller holds the
    /// state lock, so no live daemon serves it). The file is made 0600.
    package static func listen(path: String, backlog: Int32) throws(SystemFailure) -> UnixSocket {
        let s = try stream()
        if unlink(path) != 0 && errno != ENOENT { throw SystemFailure("cannot remove the old socket \(path)", errno: errno) }
        let bound = withAddress(path) { addr, len in bind(s.fd, addr, len) }
        guard bound == 0 else { throw SystemFailure("cannot bind \(path)", errno: errno) }
        guard chmod(path, 0o600) == 0 else { throw SystemFailure("cannot chmod \(path)", errno: errno) }
        guard Glibc.listen(s.fd, backlog) == 0 else { throw SystemFailure("cannot listen on \(path)", errno: errno) }
        return s
    }

    /// Connects without waiting. `nil` when nothing listens there (no file, a stale file
    /// from a killed daemon, or a full backlog): the caller may try again.
    package static func connect(path: String) throws(SystemFailure) -> UnixSocket? {
        let s = try stream()
        let rc = withAddress(path) { addr, len in Glibc.connect(s.fd, addr, len) }
        if rc == 0 { return s }
        switch errno {
        case ENOENT, ECONNREFUSED, EAGAIN: return nil
        case let code: throw SystemFailure("cannot connect to \(path)", errno: code)
        }
    }

    private static func stream() throws(SystemFailure) -> UnixSocket {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemFailure("cannot create a socket", errno: errno) }
        return UnixSocket(fd: fd)
    }

    /// Calls `body` with a `sockaddr_un` for `path`. A path too long for `sun_path` (108
    /// bytes) is reached through `/proc/self/fd/N/NAME`, N an open descriptor of its folder.
    private static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var addr = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        var target = path
        var folder: Int32 = -1
        defer { if folder >= 0 { Glibc.close(folder) } }
        if path.utf8.count >= capacity {
            let dir = PathText.parent(path)
            folder = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard folder >= 0 else { return -1 }
            target = "/proc/self/fd/\(folder)/\(PathText.lastComponent(path))"
            guard target.utf8.count < capacity else {
                errno = ENAMETOOLONG
                return -1
            }
        }
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: target.utf8)
            raw[target.utf8.count] = 0
        }
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    // MARK: serving

    /// Waits up to `timeout` seconds for a connection; nil if none came.
    package func accept(timeout: Double) throws(SystemFailure) -> UnixSocket? {
        guard wait(for: Int16(POLLIN), seconds: timeout) else { return nil }
        let fd = acceptNonBlockingCloseOnExec(self.fd, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
        if fd >= 0 { return UnixSocket(fd: fd) }
        switch errno {
        case EAGAIN, EINTR, ECONNABORTED: return nil  // the client gave up meanwhile
        case let code: throw SystemFailure("accept", errno: code)
        }
    }

    /// The process at the other end, as the kernel recorded it at connect (or listen) time.
    package func peer() -> Peer? {
        var cred = Peer(pid: 0, uid: 0, gid: 0)  // the layout of struct ucred
        var len = socklen_t(MemoryLayout<Peer>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0, len == socklen_t(MemoryLayout<Peer>.size) else { return nil }
        return cred
    }

    // MARK: lines

    /// Reads one line (without its newline). Nil at the end of the stream. Fails when the
    /// line grows beyond `maxBytes`, when nothing arrives for `idle` seconds, or at `deadline`.
    package func readLine(maxBytes: Int, idle: Double, deadline: ContinuousClock.Instant) throws(SystemFailure) -> String? {
        var scanned = 0
        while true {
            if let nl = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            scanned = buffer.count
            if buffer.count > maxBytes { throw SystemFailure("a line longer than \(maxBytes) bytes") }
            let left = remaining(until: deadline)
            guard left > 0 else { throw SystemFailure("no complete line in time") }
            guard wait(for: Int16(POLLIN), seconds: min(idle, left)) else {
                throw SystemFailure(left <= idle ? "no complete line in time" : "the peer sent nothing for \(DurationParser.format(idle))")
            }
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 {
                guard buffer.isEmpty else { throw SystemFailure("the peer closed the connection in the middle of a line") }
                return nil
            }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw SystemFailure("read", errno: errno)
            }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// Writes `line` and a newline. Fails when the peer takes no bytes for `stall` seconds
    /// (a client that stopped reading) or has gone.
    package func write(line: String, stall: Double) throws(SystemFailure) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno != EAGAIN { throw SystemFailure("write", errno: errno) }
            guard wait(for: Int16(POLLOUT), seconds: stall) else { throw SystemFailure("the peer took nothing for \(DurationParser.format(stall))") }
        }
    }

    /// Reads and drops what the peer has sent so far, up to `maxBytes`, without waiting. A
    /// socket closed with bytes unread is reset: the peer would lose what was written to it.
    package func discardReceived(maxBytes: Int) {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var total = 0
        while total < maxBytes {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            total += n
        }
    }

    package func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    // MARK: waiting

    private func wait(for events: Int16, seconds: Double) -> Bool {
        var p = pollfd(fd: fd, events: events, revents: 0)
        let deadline = ContinuousClock.now.advanced(by: .seconds(max(0, seconds)))
        while true {
            let ms = Int32(min(Double(Int32.max), max(0, remaining(until: deadline) * 1000).rounded(.up)))
            let rc = poll(&p, 1, ms)
            if rc > 0 { return true }  // ready, or an error/hang-up the next call reports
            if rc == 0 { return false }
            if errno != EINTR { return false }
        }
    }

    private func remaining(until deadline: ContinuousClock.Instant) -> Double {
        let d = deadline - ContinuousClock.now
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// accept4(2), which Glibc's Swift overlay leaves out (a GNU extension). Atomic
/// close-on-exec: a plugin started at that moment must not inherit the connection (the
/// client would wait for the plugin to end to see the end of the answer).
@_silgen_name("accept4")
private func acceptNonBlockingCloseOnExec(_ fd: Int32, _ addr: UnsafeMutablePointer<sockaddr>?, _ len: UnsafeMutablePointer<socklen_t>?, _ flags: Int32)
    -> Int32
