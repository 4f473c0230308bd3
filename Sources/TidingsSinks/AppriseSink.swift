import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "apprise"`: runs the `apprise` command (PyPI `apprise`) once per event, reaching the
/// 100+ services Apprise knows by URL (`tgram://…`, `mailto://…`, `json://…`).
///
/// Options: `urls` / `urls_file` / `urls_env` / `urls_credential` (required, secret: Apprise
/// URLs carry tokens; inline a string or a list, otherwise one URL per line), `command` (the
/// program, default `apprise` from `$PATH`; relative paths resolve beside the config file),
/// `title_template`, `body_template` (Mustache, plain text), `timeout` (default "60s").
///
/// The URLs never reach the command line (`ps` shows every argument to every local user): they
/// go in the `APPRISE_URLS` environment variable, which only the daemon's user can read and
/// which Apprise prefers to its default configuration files. The body goes on stdin (an event
/// without a body has its title as the body: Apprise needs one); the title
/// and the notification type (`-n`: info, success for a recovery, warning, failure for
/// critical) are arguments. Runs through the core's `ProcessRunner`, as the exec sink does.
///
/// Outcome, from Apprise's exit status: 0 delivered; 1 (a service failed) and a timeout are
/// retried; 4 (some services reached, some not) is a dead letter, since a retry would notify the
/// services already reached again and Apprise does not say which; 2 (command line refused),
/// 3 (no service matched) and a missing or unusable command disable the sink until reload.
package struct AppriseSink: Sink {
    /// The command, or why it cannot run.
    enum Program: Sendable {
        case found(String)
        case unusable(String)
    }

    var program: Program
    var urls: [Secret]
    var title: MessageTemplate
    var body: MessageTemplate
    var timeout: TimeInterval

    init(program: Program, urls: [Secret], title: MessageTemplate, body: MessageTemplate, timeout: TimeInterval = 60) {
        self.program = program
        self.urls = urls
        self.title = title
        self.body = body
        self.timeout = timeout
    }

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "apprise", summary: "notify 100+ services through the apprise command") { o, _ in
        let urls = try o.secretLines("urls", required: true) ?? []
        urls.forEach { AppriseURL.registerParts(of: $0.value) }
        let command = try o.string("command") ?? "apprise"
        guard !command.isEmpty else { throw o.error("command", "\(o.what): 'command' must not be empty") }
        let program: Program
        let path = command.contains("/") || command.hasPrefix("~") ? o.resolvePath(command) : command
        if let found = ExecSink.findExecutable(path) {
            if let untrusted = o.untrustedCommand(found) { throw untrusted }
            program = .found(found)
        } else {
            program = .unusable(
                "the apprise command \(path) was not found" + (path.contains("/") ? "" : " in $PATH")
                    + ": install it (pipx install apprise, or apt install apprise) or set 'command' to its path, then reload")
        }
        return AppriseSink(
            program: program, urls: urls,
            title: try MessageTemplate.option(o, "title_template", default: "{{title}}", markup: .plain),
            body: try MessageTemplate.option(o, "body_template", default: "{{body}}{{#url}}\n{{url}}{{/url}}", markup: .plain),
            timeout: try o.duration("timeout", minimum: 1) ?? 60)
    }

    /// One run of the command: what it is given.
    package struct Invocation: Sendable {
        var arguments: [String]
        /// Added to the daemon's environment.
        var environment: [String: String]
        var stdin: Data
    }

    /// The longest title passed as an argument (Linux refuses any argument over 128 KiB).
    static let maxTitleBytes = 32 << 10

    /// The run for `event` (pure: tests inspect it).
    package func invocation(for event: Event, program: String) -> Invocation {
        var title = self.title.render(event)
        var body = self.body.render(event)
        // Apprise refuses a notification without a body ("No message body or attachment was
        // specified", exit 1, which would be retried for ever): the title becomes the body.
        if body.allSatisfy(\.isWhitespace) { (title, body) = ("", title) }
        title = title.replacingScalars("\0", with: "").cut(utf8Bytes: Self.maxTitleBytes)
        var arguments = [program, "-v", "-i", "text", "-n", Self.notificationType(event)]
        // `--title=…` in one word: a title starting with "-" stays a title.
        if !title.isEmpty { arguments.append("--title=" + title) }
        return Invocation(
            arguments: arguments,
            environment: ["APPRISE_URLS": urls.map(\.value).joined(separator: "\n")],
            stdin: Data(body.utf8))
    }

    /// Apprise's notification type (`-n`) for an event.
    static func notificationType(_ e: Event) -> String {
        switch e.severity {
        case .critical: return "failure"
        case .warning: return "warning"
        case .info: return e.event == .recovered ? "success" : "info"
        }
    }

    /// Runs the command once per event, in order; the first failure throws, classified.
    package func deliver(_ events: [Event]) async throws {
        let path: String
        switch program {
        case .found(let p) where FilePermissions.isExecutableFile(p) || !p.contains("/"):
            path = p
        case .found(let p):
            throw DeliveryError(.gone, "the apprise command \(p) is gone or not executable: reinstall it, then reload")
        case .unusable(let reason):
            throw DeliveryError(.gone, reason)
        }
        for e in events { try await run(invocation(for: e, program: path)) }
    }

    func run(_ call: Invocation) async throws {
        let out: ProcessRunner.Output
        do {
            out = try await ProcessRunner.run(
                call.arguments, environment: ProcessInfo.processInfo.environment.merging(call.environment) { $1 },
                stdin: call.stdin, timeout: timeout, maxOutput: 64 << 10)
        } catch {
            throw DeliveryError(.retryable, "apprise: \(error)")
        }
        if let failure = Self.outcome(out.termination, reason: Self.reason(out), timeout: timeout) { throw failure }
    }

    /// What Apprise said last (it logs to stdout; `-v` adds its warnings, which name the failure).
    static func reason(_ out: ProcessRunner.Output) -> String {
        for stream in [out.stdout, out.stderr] {
            let text = String(decoding: stream.suffix(8 << 10), as: UTF8.self)
            if let line = text.split(whereSeparator: \.isNewline).last(where: { !$0.allSatisfy(\.isWhitespace) }) {
                return ": " + Redactor.shared.excerpt(Data(line.utf8))
            }
        }
        return ""
    }

    /// The outbox's reading of an exit; nil means delivered.
    static func outcome(_ termination: ProcessRunner.Output.Termination, reason: String, timeout: TimeInterval) -> DeliveryError? {
        switch termination {
        case .exited(0):
            return nil
        case .exited(2):
            return DeliveryError(.gone, "apprise refused its command line (exit 2)\(reason); is it Apprise 1.x or later? fix 'command', then reload")
        case .exited(3):
            return DeliveryError(.gone, "apprise had no service to notify (exit 3)\(reason); check 'urls', then reload")
        case .exited(4):
            return DeliveryError(
                .permanent, "apprise reached some services but not all (exit 4)\(reason); not retried, so the services reached are not notified twice")
        case .exited(5):
            return DeliveryError(.retryable, "apprise timed out reaching its services (exit 5)\(reason)")
        case .exited(let status):
            return DeliveryError(.retryable, "apprise failed to notify (exit \(status))\(reason)")
        case .signaled(let signal):
            return DeliveryError(.retryable, "apprise was killed by signal \(signal)\(reason)")
        case .timedOut:
            return DeliveryError(.retryable, "apprise timed out after \(DurationParser.format(timeout)) and was killed\(reason)")
        }
    }
}

/// The parts of an Apprise URL that are secrets of their own, so that the ``Redactor`` also
/// scrubs them when Apprise or a service quotes one part of the URL. Apprise URLs are often not
/// URLs to a strict parser (`tgram://123456:ABC…/chat` has a "port" of letters): they are split
/// by hand.
enum AppriseURL {
    /// Pieces shorter than this (of the host, path and query) are left alone: ports, ids, and
    /// short words would redact ordinary text; tokens are longer.
    static let minimumTokenLength = 16

    /// The user and password before an `@`, and every long piece between `/ ? & = : @ # , ;`.
    static func secretParts(of url: String) -> [String] {
        let rest = url.firstRange(of: "://").map { String(url[$0.upperBound...]) } ?? url
        var parts: [String] = []
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") {
            parts += authority[..<at].split(separator: ":", maxSplits: 1).map(String.init)
        }
        let pieces = rest.split(whereSeparator: { "/?&=:@#,;".contains($0) }).map(String.init)
        parts += pieces.filter { $0.count >= minimumTokenLength }
        return parts.flatMap { [$0, $0.percentDecoded].compactMap { $0 } }
    }

    static func registerParts(of url: String) {
        secretParts(of: url).forEach { Redactor.shared.register($0) }
    }
}
