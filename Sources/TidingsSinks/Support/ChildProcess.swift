import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs a command in its own process group, feeds it stdin, keeps the tail of its stderr,
/// and kills the whole group when it overruns its timeout. All blocking happens on
/// dedicated threads, never on the async pool.
enum ChildProcess {
    private static let spawnLock = NSLock()

    struct Outcome: Sendable {
        enum Status: Sendable, Equatable {
            case exited(Int32)
            case signaled(Int32)
            case timedOut
        }
        var status: Status
        /// The last 4 KiB of stderr.
        var stderr: String
    }

    enum Failure: Error, CustomStringConvertible {
        case spawn(String, Int32)
        var description: String {
            switch self {
            case .spawn(let path, let code): return "cannot run \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// Resolves a program the way a shell would: with a slash it is a path, else it is searched in `$PATH`.
    static func resolve(_ program: String, environment: [String: String]) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") where !dir.isEmpty {
            let candidate = "\(dir)/\(program)"
            var st = stat()
            if stat(candidate, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Starts the command in a new process group; returns its pid, its stdin and its stderr.
    private static func spawn(_ path: String, argv: [String], environment: [String: String]) throws -> (pid_t, Int32, Int32) {
        // pipe2 is not visible from Swift's Glibc module: pipe + FD_CLOEXEC under a lock, so
        // two deliveries spawning at once cannot inherit each other's pipe ends.
        var inPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        guard pipe(&inPipe) == 0 else { throw Failure.spawn(path, errno) }
        guard pipe(&errPipe) == 0 else {
            close(inPipe[0]); close(inPipe[1])
            throw Failure.spawn(path, errno)
        }
        for fd in inPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setpgroup(&attr, 0)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var noMask = sigset_t()
        sigemptyset(&noMask)
        posix_spawnattr_setsigmask(&attr, &noMask)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (cArgs + cEnv).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attr, cArgs, cEnv)
        close(inPipe[0])
        close(errPipe[1])
        guard rc == 0 else {
            close(inPipe[1]); close(errPipe[0])
            throw Failure.spawn(path, rc)
        }
        return (pid, inPipe[1], errPipe[0])

    }

    static func run(
        _ argv: [String], environment: [String: String], stdin: Data, timeout: TimeInterval
    ) async throws -> Outcome {
        guard let program = argv.first, let path = resolve(program, environment: environment) else {
            throw Failure.spawn(argv.first ?? "", ENOENT)
        }
        let (pid, writeFD, readFD) = try spawnLock.withLock { try spawn(path, argv: argv, environment: environment) }
        let child = pid
        let finished = Mutex(false)
        let timedOut = Mutex(false)
        // Feed stdin on its own thread: a child that writes lots of stderr before reading
        // stdin must not deadlock against us. A child that never reads gets EPIPE (ignored).
        Thread.detachNewThread {
            signal(SIGPIPE, SIG_IGN)
            stdin.withUnsafeBytes { buf in
                var offset = 0
                while offset < buf.count {
                    let n = write(writeFD, buf.baseAddress! + offset, buf.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    offset += n
                }
            }
            close(writeFD)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
            finished.withLock { done in
                if !done {
                    timedOut.withLock { $0 = true }
                    kill(-child, SIGKILL)
                }
            }
        }
        return await withCheckedContinuation { (c: CheckedContinuation<Outcome, Never>) in
            Thread.detachNewThread {
                var tail = Data()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = read(readFD, &buffer, buffer.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    tail.append(contentsOf: buffer[0..<n])
                    if tail.count > 8192 { tail = tail.suffix(4096) }
                }
                close(readFD)
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
                finished.withLock { $0 = true }
                let text = String(decoding: tail.suffix(4096), as: UTF8.self)
                let result: Outcome.Status
                if timedOut.withLock({ $0 }) {
                    result = .timedOut
                } else if status & 0x7f == 0 {
                    result = .exited((status >> 8) & 0xff)
                } else {
                    result = .signaled(status & 0x7f)
                }
                c.resume(returning: Outcome(status: result, stderr: text))
            }
        }
    }
}
