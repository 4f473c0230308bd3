import CSpawn
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// Runs a child process with a deadline and bounded output (exec providers and sinks).
///
/// The child starts clean, whatever the daemon does with its own signals and descriptors
/// (posix_spawn, not Foundation's `Process`, which passes on the parent's signal mask and
/// ignored signals): an empty signal mask, the default action for every signal, leader of a
/// new session and process group, only stdin, stdout and stderr open, in `directory`.
///
/// One dedicated thread per run waits in poll(2) on the pipes and on the child's exit (a
/// pidfd), never on the Swift cooperative pool. The run ends when the child exits; output that
/// still arrives after that (a background process that kept stdout open) is read for
/// ``drainGrace`` and then left unread (the run is not a timeout, and such processes are left
/// alone). Past the deadline, when the calling task is cancelled, or on ``stopAll()``, the
/// whole process group gets SIGTERM, then SIGKILL once the child has exited or after
/// ``killGrace``; the child is reaped before `run` returns.
package enum ProcessRunner {
    package struct Output: Sendable {
        /// How the child ended.
        package enum Termination: Sendable, Equatable {
            /// It exited by itself with this status.
            case exited(Int32)
            /// A signal it did not handle killed it (not one of ours).
            case signaled(Int32)
            /// It overran the deadline and its process group was killed.
            case timedOut
        }

        package var termination: Termination
        package var stdout: Data
        package var stderr: Data
        /// stdout was cut at `maxOutput`.
        package var truncated: Bool
    }

    package struct LaunchError: Error, CustomStringConvertible, Sendable {
        package var description: String
    }

    /// After SIGTERM, how long the process group has before SIGKILL. Short: a poll's outer
    /// timeout (PollRunner) gives up one second after the deadline, and `check` must not exit
    /// before the group is gone.
    static let killGrace: Duration = .milliseconds(500)
    /// After the child exited, how long output from processes it left behind is still read.
    static let drainGrace: Duration = .milliseconds(250)
    /// stderr is only a reason for a failure: its first 64 KiB are kept.
    static let maxStderr = 64 << 10

    /// How the run notices that the child exited.
    enum ExitWatch: Sendable {
        /// A pidfd in the poll set (Linux 5.3): woken at once.
        case pidfd
        /// waitid(WNOHANG) every few milliseconds, where pidfd_open is refused (old kernels, seccomp).
        case polling
    }

    /// Runs `command` (`./x` and `x/y` resolve against `directory`, a bare name against `PATH`)
    /// in `directory`, with `environment` (nil: this process's), `stdin` written to it, at most
    /// `maxOutput` bytes of stdout kept, and killed past `timeout` seconds.
    package static func run(
        _ command: [String], directory: String? = nil, environment: [String: String]? = nil, stdin: Data? = nil,
        timeout: TimeInterval, maxOutput: Int = 10 << 20
    ) async throws -> Output {
        try await run(
            command, directory: directory, environment: environment, stdin: stdin, timeout: timeout,
            maxOutput: maxOutput, exitWatch: .pidfd)
    }

    static func run(
        _ command: [String], directory: String?, environment: [String: String]?, stdin: Data?,
        timeout: TimeInterval, maxOutput: Int, exitWatch: ExitWatch
    ) async throws -> Output {
        guard let exe = command.first else { throw LaunchError(description: "empty command") }
        if let directory {
            var st = stat()
            guard stat(directory, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                throw LaunchError(description: "cannot run \(exe): working directory \(directory) does not exist")
            }
        }
        ignoreSIGPIPE()
        let request = Request(
            path: resolve(exe, directory: directory, environment: environment), arguments: command,
            directory: directory, environment: environment.map { $0.map { "\($0.key)=\($0.value)" } },
            stdin: stdin ?? Data(), timeout: .seconds(min(max(0, timeout), 1e9)), maxOutput: maxOutput,
            exitWatch: exitWatch)
        let cancellation = try Cancellation()
        guard runs.admit(cancellation) else {
            cancellation.close()
            throw CancellationError()
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Output, Error>) in
                let started = startDetachedThread(name: "exec \(PathText.lastComponent(exe))") {
                    c.resume(with: Result { try Execution.run(request, cancellation: cancellation) })
                    cancellation.close()
                    runs.finished(cancellation)
                }
                if !started {
                    cancellation.close()
                    runs.finished(cancellation)
                    c.resume(throwing: LaunchError(description: "cannot run \(exe): cannot start a thread"))
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// The runs in progress in this process, for ``stopAll()``.
    private static let runs = LiveRuns()

    /// Stops every run in progress as a timeout stops one (SIGTERM to its process group,
    /// SIGKILL after ``killGrace``) and returns once each child is reaped; a run that starts
    /// later fails at once with `CancellationError`. For a process that is about to end on
    /// SIGINT or SIGTERM (`tidings check`): its children lead process groups of their own,
    /// which Ctrl-C at the terminal never reaches, and cancelling its tasks is not enough
    /// (a poll's timeout stops waiting for a cancelled body at once).
    package static func stopAll() async {
        await runs.stopAll()
    }

    /// A child that exits without reading its stdin makes our write fail with EPIPE; without
    /// this, the default SIGPIPE action would kill the whole daemon instead. (Children get the
    /// default action back: posix_spawn resets every signal.)
    private static func ignoreSIGPIPE() { _ = sigpipeIgnored }
    private static let sigpipeIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    /// `./x` and `x/y` resolve against `directory`; a bare name is looked up in `PATH`.
    static func resolve(_ exe: String, directory: String?, environment: [String: String]?) -> String {
        if exe.hasPrefix("/") { return exe }
        if exe.utf8.contains(UInt8(ascii: "/")) { return PathText.appending(exe, to: directory ?? FileManager.default.currentDirectoryPath) }
        return lookUp(exe, in: (environment ?? ProcessInfo.processInfo.environment)["PATH"]) ?? exe
    }

    /// The first executable file `name` in the directories of `searchPath` (a `PATH` value;
    /// nil: this process's `PATH`, else `/usr/local/bin:/usr/bin:/bin`).
    package static func lookUp(_ name: String, in searchPath: String? = nil) -> String? {
        let path = searchPath ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first(where: FilePermissions.isExecutableFile)
    }

    /// What to run, fixed before the thread starts.
    struct Request: Sendable {
        var path: String
        /// argv, including argv[0] (the command as written).
        var arguments: [String]
        var directory: String?
        /// `KEY=VALUE` entries; nil: this process's environment.
        var environment: [String]?
        var stdin: Data
        var timeout: Duration
        var maxOutput: Int
        var exitWatch: ExitWatch
    }

    /// Task cancellation reaching the run's thread: a flag and a pipe that wakes its poll.
    final class Cancellation: Sendable {
        private struct State {
            var cancelled = false
            /// Write end of the wake pipe; -1 once the run is over.
            var wakeWriter: Int32
        }
        private let state: Mutex<State>
        /// Read end, in the run's poll set.
        let wakeReader: Int32

        init() throws {
            let (reader, writer) = try Pipe2.make(keeping: .both)
            wakeReader = reader
            state = Mutex(State(wakeWriter: writer))
        }

        var isCancelled: Bool { state.withLock { $0.cancelled } }

        func cancel() {
            state.withLock { s in
                s.cancelled = true
                if s.wakeWriter >= 0 {
                    var byte: UInt8 = 1
                    _ = write(s.wakeWriter, &byte, 1)
                }
            }
        }

        /// Closes the wake pipe (under the lock, so a late `cancel` never writes to a reused fd).
        func close() {
            state.withLock { s in
                if s.wakeWriter >= 0 { Glibc.close(s.wakeWriter) }
                s.wakeWriter = -1
            }
            Glibc.close(wakeReader)
        }
    }

    /// The runs in progress, and whether more may start.
    final class LiveRuns: Sendable {
        private struct State {
            var stopping = false
            var running: [ObjectIdentifier: Cancellation] = [:]
            /// ``stopAll()`` waiting for the last run to end.
            var waiting: [CheckedContinuation<Void, Never>] = []
        }
        private let state = Mutex(State())

        /// Counts a run in before it starts; false once stopping.
        func admit(_ run: Cancellation) -> Bool {
            state.withLock { s in
                guard !s.stopping else { return false }
                s.running[ObjectIdentifier(run)] = run
                return true
            }
        }

        /// The run is over: its child, if it started one, is reaped.
        func finished(_ run: Cancellation) {
            let waiting = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.running[ObjectIdentifier(run)] = nil
                guard s.running.isEmpty else { return [] }
                defer { s.waiting = [] }
                return s.waiting
            }
            waiting.forEach { $0.resume() }
        }

        func stopAll() async {
            let running = state.withLock { s in
                s.stopping = true
                return Array(s.running.values)
            }
            running.forEach { $0.cancel() }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let done = state.withLock { s -> Bool in
                    guard !s.running.isEmpty else { return true }
                    s.waiting.append(c)
                    return false
                }
                if done { c.resume() }
            }
        }
    }

    /// A close-on-exec pipe whose ends are above 0-2 (so that the child's dup2 onto 0-2 never
    /// overwrites another pipe end, even with the daemon's stdio closed). Only the ends this
    /// process keeps are made non-blocking: the child gets ordinary blocking stdio.
    enum Pipe2 {
        enum Ours { case reader, writer, both }

        static func make(keeping ours: Ours) throws -> (reader: Int32, writer: Int32) {
            var fds: [Int32] = [-1, -1]
            guard tidings_pipe2(&fds, O_CLOEXEC) == 0 else {
                throw LaunchError(description: "cannot create a pipe: \(String(cString: strerror(errno)))")
            }
            for i in 0..<2 where fds[i] < 3 {
                let high = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)
                Glibc.close(fds[i])
                fds[i] = high
            }
            guard fds[0] >= 0, fds[1] >= 0 else {
                let reason = String(cString: strerror(errno))
                fds.filter { $0 >= 0 }.forEach { Glibc.close($0) }
                throw LaunchError(description: "cannot create a pipe: \(reason)")
            }
            if ours != .writer { _ = fcntl(fds[0], F_SETFL, O_NONBLOCK) }
            if ours != .reader { _ = fcntl(fds[1], F_SETFL, O_NONBLOCK) }
            return (fds[0], fds[1])
        }
    }

    /// Output read from one pipe, kept up to a limit (the rest is read and dropped, so the
    /// child never blocks on a full pipe).
    struct BoundedBuffer {
        let limit: Int
        var data = Data()
        var overflowed = false

        mutating func append(_ bytes: UnsafeRawBufferPointer) {
            let room = limit - data.count
            if bytes.count > room { overflowed = true }
            if room > 0 { data.append(contentsOf: bytes.prefix(room)) }
        }
    }

    /// One run on its own thread: spawn, pump the pipes, enforce the deadline, reap.
    struct Execution {
        /// Why the run is stopping the child.
        enum Stop { case deadline, cancellation }
        /// Where the run is in stopping the child's process group.
        enum Kill {
            case none
            case terminating(killAt: ContinuousClock.Instant)
            case killed
        }

        let request: Request
        let cancellation: Cancellation
        let pid: pid_t
        /// -1 with ``ExitWatch/polling``.
        var pidfd: Int32
        var stdinFD: Int32
        var stdoutFD: Int32
        var stderrFD: Int32
        var stdout: BoundedBuffer
        var stderr = BoundedBuffer(limit: ProcessRunner.maxStderr)
        var written = 0
        var exitedAt: ContinuousClock.Instant?
        var stop: Stop?
        var kill = Kill.none
        let clock = ContinuousClock()

        static func run(_ request: Request, cancellation: Cancellation) throws -> Output {
            if cancellation.isCancelled { throw CancellationError() }
            var e = try spawn(request, cancellation: cancellation)
            let status = e.pump()
            e.closeAll()
            if e.stop == .cancellation { throw CancellationError() }
            let termination: Output.Termination =
                e.stop == .deadline
                ? .timedOut
                : status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
            return Output(termination: termination, stdout: e.stdout.data, stderr: e.stderr.data, truncated: e.stdout.overflowed)
        }

        private static func spawn(_ request: Request, cancellation: Cancellation) throws -> Execution {
            let input = try Pipe2.make(keeping: .writer)
            let output: (reader: Int32, writer: Int32)
            let errors: (reader: Int32, writer: Int32)
            do { output = try Pipe2.make(keeping: .reader) } catch {
                closeFDs(input.reader, input.writer)
                throw error
            }
            do { errors = try Pipe2.make(keeping: .reader) } catch {
                closeFDs(input.reader, input.writer, output.reader, output.writer)
                throw error
            }
            let childEnds = [input.reader, output.writer, errors.writer]
            let pid: pid_t
            do {
                pid = try spawnChild(request, stdio: childEnds)
            } catch {
                closeFDs(input.reader, input.writer, output.reader, output.writer, errors.reader, errors.writer)
                throw error
            }
            closeFDs(input.reader, output.writer, errors.writer)
            var e = Execution(
                request: request, cancellation: cancellation, pid: pid,
                pidfd: request.exitWatch == .pidfd ? tidings_pidfd_open(pid) : -1,
                stdinFD: input.writer, stdoutFD: output.reader, stderrFD: errors.reader,
                stdout: BoundedBuffer(limit: request.maxOutput))
            if request.stdin.isEmpty { e.closeStdin() }
            return e
        }

        /// posix_spawn with a clean signal state, a new session, stdio from `stdio` and nothing else open.
        private static func spawnChild(_ request: Request, stdio: [Int32]) throws -> pid_t {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            for (target, fd) in stdio.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, Int32(target)) }
            tidings_spawn_addclosefrom(&actions, 3)
            if let directory = request.directory { tidings_spawn_addchdir(&actions, directory) }

            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t()
            sigemptyset(&none)
            posix_spawnattr_setsigmask(&attributes, &none)
            // Every bit, not sigfillset: glibc's leaves out its two internal signals (32, 33), and
            // posix_spawn then sets those to SIG_IGN in the child, which exec keeps.
            var all = sigset_t()
            withUnsafeMutableBytes(of: &all) { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xff) }
            posix_spawnattr_setsigdefault(&attributes, &all)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF) | tidings_spawn_setsid_flag())

            let argv = CStrings(request.arguments)
            defer { argv.free() }
            let envp = request.environment.map(CStrings.init)
            defer { envp?.free() }
            var pid: pid_t = 0
            let rc =
                if let envp {
                    posix_spawn(&pid, request.path, &actions, &attributes, argv.pointers, envp.pointers)
                } else {
                    posix_spawn(&pid, request.path, &actions, &attributes, argv.pointers, environ)
                }
            guard rc == 0 else {
                throw LaunchError(description: "cannot run \(request.arguments[0]): \(String(cString: strerror(rc)))")
            }
            return pid
        }

        /// Until the child has exited (and the kill, if any, is complete); returns its wait status.
        mutating func pump() -> Int32 {
            let deadline = clock.now + request.timeout
            var scratch = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                let now = clock.now
                if exitedAt == nil && hasExited() { exitedAt = now }
                if stop == nil && exitedAt == nil {
                    if cancellation.isCancelled { stop = .cancellation } else if now >= deadline { stop = .deadline }
                }
                advanceKill(now)
                if let exited = exitedAt, !isTerminating, (stdoutFD < 0 && stderrFD < 0) || now >= exited + ProcessRunner.drainGrace {
                    break
                }
                waitForActivity(until: nextWake(deadline: deadline), scratch: &scratch)
            }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }

        private var isTerminating: Bool {
            if case .terminating = kill { return true }
            return false
        }

        /// SIGTERM to the group once a stop is decided; SIGKILL when the child has gone (its
        /// group may not have) or the grace is over. The child is not reaped before that, so its
        /// process group id cannot be reused by an unrelated process meanwhile.
        private mutating func advanceKill(_ now: ContinuousClock.Instant) {
            switch kill {
            case .none where stop != nil:
                Glibc.kill(-pid, SIGTERM)
                kill = .terminating(killAt: now + ProcessRunner.killGrace)
            case .terminating(let killAt) where exitedAt != nil || now >= killAt || (stop == .deadline && cancellation.isCancelled):
                // (Cancelled while terminating after the deadline: the caller has given up waiting.)
                Glibc.kill(-pid, SIGKILL)
                kill = .killed
            default:
                break
            }
        }

        private func nextWake(deadline: ContinuousClock.Instant) -> ContinuousClock.Instant {
            var wake: ContinuousClock.Instant
            if let exited = exitedAt {
                wake = exited + ProcessRunner.drainGrace
            } else if case .terminating(let killAt) = kill {
                wake = killAt
            } else if stop == nil {
                wake = deadline
            } else {
                wake = clock.now + .seconds(1)  // killed: the exit is on its way
            }
            if exitedAt == nil && pidfd < 0 { wake = min(wake, clock.now + .milliseconds(5)) }
            return wake
        }

        /// One poll(2): reads what is there, writes what stdin can take.
        private mutating func waitForActivity(until wake: ContinuousClock.Instant, scratch: inout [UInt8]) {
            var fds: [pollfd] = [pollfd(fd: cancellation.wakeReader, events: Int16(POLLIN), revents: 0)]
            if stdoutFD >= 0 { fds.append(pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)) }
            if stderrFD >= 0 { fds.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
            if stdinFD >= 0 { fds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }
            if pidfd >= 0 && exitedAt == nil { fds.append(pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)) }
            let (seconds, attoseconds) = (wake - clock.now).components
            let ms = Int32(clamping: max(0, min(seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000, 60_000)))
            guard poll(&fds, nfds_t(fds.count), ms) > 0 else { return }  // timeout or EINTR: the loop re-checks
            for p in fds where p.revents != 0 {
                switch p.fd {
                case cancellation.wakeReader: _ = read(p.fd, &scratch, scratch.count)
                case stdoutFD: Self.readAvailable(&stdoutFD, into: &stdout, scratch: &scratch)
                case stderrFD: Self.readAvailable(&stderrFD, into: &stderr, scratch: &scratch)
                case stdinFD: writeInput()
                default: break  // the pidfd: hasExited() confirms on the next turn
                }
            }
        }

        private static func readAvailable(_ fd: inout Int32, into buffer: inout BoundedBuffer, scratch: inout [UInt8]) {
            while fd >= 0 {
                let n = scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    scratch.withUnsafeBytes { buffer.append(UnsafeRawBufferPointer(rebasing: $0.prefix(n))) }
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    if n == 0 || errno != EAGAIN {
                        Glibc.close(fd)
                        fd = -1
                    }
                    return
                }
            }
        }

        private mutating func writeInput() {
            while stdinFD >= 0 && written < request.stdin.count {
                let n = request.stdin.withUnsafeBytes { write(stdinFD, $0.baseAddress! + written, $0.count - written) }
                if n > 0 {
                    written += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    if errno != EAGAIN { closeStdin() }  // EPIPE: the child does not read its stdin
                    return
                }
            }
            if written >= request.stdin.count { closeStdin() }
        }

        /// Whether the child has exited, without reaping it.
        private func hasExited() -> Bool {
            var info = siginfo_t()
            let rc = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
            return rc == 0 && info.si_signo == SIGCHLD
        }

        private mutating func closeStdin() {
            if stdinFD >= 0 { Glibc.close(stdinFD) }
            stdinFD = -1
        }

        mutating func closeAll() {
            closeStdin()
            Execution.closeFDs(stdoutFD, stderrFD, pidfd)
            stdoutFD = -1
            stderrFD = -1
            pidfd = -1
        }

        static func closeFDs(_ fds: Int32...) {
            for fd in fds where fd >= 0 { Glibc.close(fd) }
        }
    }

    /// A NULL-terminated array of C strings (argv, envp), freed explicitly.
    struct CStrings {
        let pointers: [UnsafeMutablePointer<CChar>?]
        init(_ strings: [String]) { pointers = strings.map { strdup($0) } + [nil] }
        func free() { pointers.forEach { Glibc.free($0) } }
    }
}
