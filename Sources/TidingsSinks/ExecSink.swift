import FoundationEssentials
import Logging
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "exec"`: runs `command` (an array; relative paths resolve against the config file's
/// directory, bare names against `$PATH`) once per event.
///
/// The event JSON (DESIGN §4) plus a newline is on stdin; the environment also carries
/// `TIDINGS_TITLE`, `TIDINGS_BODY`, `TIDINGS_URL` (empty when absent), `TIDINGS_SEVERITY`,
/// `TIDINGS_SOURCE`, `TIDINGS_EVENT` (new, changed, removed, reminder, error, recovered),
/// `TIDINGS_KIND`, `TIDINGS_KEY` and `TIDINGS_EVENT_ID` (title, body, URL and key cut at
/// 32 KiB: Linux refuses longer variables). stdout is discarded.
///
/// Exit 0 is a delivery; a non-zero exit, a signal or overrunning `timeout` (default "30s",
/// the command's process group is killed) is a retryable failure whose message carries the
/// last line of stderr. Runs through the core's `ProcessRunner` (its own session and process
/// group, default signal dispositions, only stdin/stdout/stderr open).
package struct ExecSink: Sink {
    /// The program and its arguments (the program already resolved to a path or a `$PATH` name).
    package var command: [String]
    /// Longer than this and the command's process group is killed.
    package var timeout: TimeInterval

    /// An exec sink; see the type's documentation for what the command receives.
    package init(command: [String], timeout: TimeInterval = 30) {
        self.command = command
        self.timeout = timeout
    }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "exec", summary: "run a command per event, event JSON on stdin") { o, _ in
        guard var command = try o.command() else {
            throw o.error(nil, "\(o.what): missing required key 'command' (an array like [\"/usr/local/bin/notify\", \"--quiet\"])")
        }
        let program = command[0]
        if program.contains("/") || program.hasPrefix("~") { command[0] = o.resolvePath(program) }
        guard let executable = findExecutable(command[0]) else {
            throw o.error("command", "\(o.what): '\(command[0])' is not an executable file" + (program.contains("/") ? "" : " in $PATH"))
        }
        if let untrusted = o.untrustedCommand(executable) { throw untrusted }
        return ExecSink(command: command, timeout: try o.duration("timeout", minimum: 0.1) ?? 30)
    }

    /// The environment a command sees for one event: the daemon's, plus the `TIDINGS_*` variables.
    package static func environment(for e: Event, base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var env = base
        env["TIDINGS_TITLE"] = e.title
        env["TIDINGS_BODY"] = e.body
        env["TIDINGS_URL"] = e.url ?? ""
        env["TIDINGS_SEVERITY"] = e.severity.rawValue
        env["TIDINGS_SOURCE"] = e.source
        env["TIDINGS_EVENT"] = e.event.rawValue
        env["TIDINGS_KIND"] = e.kind
        env["TIDINGS_KEY"] = e.key
        env["TIDINGS_EVENT_ID"] = e.id
        // NUL cannot cross execve, and Linux refuses any single variable over 128 KiB (E2BIG):
        // drop NULs and cut long values (stdin always carries the whole event).
        for key in ["TIDINGS_TITLE", "TIDINGS_BODY", "TIDINGS_URL", "TIDINGS_KEY"] {
            env[key] = env[key].map { Self.limited($0.replacingScalars("\0", with: ""), bytes: maxVariableBytes) }
        }
        return env
    }

    /// The longest `TIDINGS_*` value passed in the environment, in UTF-8 bytes.
    package static let maxVariableBytes = 32 << 10

    /// `text` cut to at most `bytes` UTF-8 bytes, on a character boundary.
    static func limited(_ text: String, bytes: Int) -> String { text.prefix(utf8Bytes: bytes) }

    /// Runs the command once per event, in order; the first failure stops and is retryable.
    package func deliver(_ events: [Event]) async throws {
        for e in events { try await run(e) }
    }

    func run(_ e: Event) async throws {
        let name = PathText.lastComponent(command[0])
        let out: ProcessRunner.Output
        do {
            out = try await ProcessRunner.run(
                command, environment: Self.environment(for: e), stdin: Data((e.jsonLine() + "\n").utf8),
                timeout: timeout, maxOutput: 64 << 10)
        } catch {
            throw DeliveryError(.retryable, "\(error)")
        }
        let stderr = String(decoding: out.stderr, as: UTF8.self)
        let reason = stderr.split(whereSeparator: \.isNewline).last.map { ": \($0)" } ?? ""
        switch out.termination {
        case .exited(0): return
        case .exited(let status): throw DeliveryError(.retryable, "\(name) exited with status \(status)\(reason)")
        case .signaled(let signal): throw DeliveryError(.retryable, "\(name) was killed by signal \(signal)\(reason)")
        case .timedOut: throw DeliveryError(.retryable, "\(name) timed out after \(DurationParser.format(timeout)) and was killed\(reason)")
        }
    }

    /// A path with a slash must be an executable file; a bare name is looked up in `$PATH`.
    static func findExecutable(_ program: String) -> String? {
        if program.contains("/") { return FilePermissions.isExecutableFile(program) ? program : nil }
        return ProcessRunner.lookUp(program)
    }
}
