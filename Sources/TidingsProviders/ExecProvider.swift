import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "exec"`: a program in `plugins.d` reports items.
///
/// - `format = "jsonl"` (default): one JSON object per stdout line with at least `key` and
///   `title` (optional `body`, `url`, `severity`, `kind`, `data`, and `fingerprint`: what
///   counts as a change, when not every detail should). Exit 0 = success;
///   non-zero = the poll failed, stderr says why.
/// - `format = "nagios"`: the monitoring-plugin convention (exit 0 OK, 1 WARNING, 2 CRITICAL,
///   3 UNKNOWN; the first stdout line is the status, later lines are long text, `|` starts
///   performance data: see ``NagiosOutput``). One item whose fingerprint is the state, so
///   OK→CRITICAL and back are `changed` events.
/// - `format = "text"`: the whole stdout is one item (exit 0 = success, as `jsonl`); a
///   change is a `changed` event whose body is the diff, as `page` does (``TextChange``).
///
/// The program runs with the plugins directory as working directory.
package struct ExecProvider: Provider, EventDescriber {
    package enum Format: String, Sendable { case jsonl, nagios, text }
    package var command: [String]
    package var format: Format
    package var directory: String
    package var sourceName: String

    package static let factory = ProviderFactory(name: "exec", summary: "a program (JSON lines, the Nagios plugin convention, or its output as text)") { o, setup, _ in
        var command = try o.command()
        if command == nil, let implicit = o.implicitCommand { command = [implicit] }
        guard let command, let exe = command.first else {
            throw o.error(nil, "\(o.what): missing required key 'command' (an array like [\"./check-disk\", \"--warn\", \"90\"])")
        }
        let formatName = try o.string("format") ?? "jsonl"
        guard let format = Format(rawValue: formatName) else {
            throw o.error("format", "\(o.what): 'format' must be \"jsonl\", \"nagios\" or \"text\", not \"\(formatName)\"")
        }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: setup.pluginsDir, isDirectory: &isDirectory), isDirectory else {
            throw o.error(nil, "\(o.what): its working directory, plugins_dir \(setup.pluginsDir), does not exist (exec sources run there)")
        }
        let program: String?
        if exe.contains("/") {
            let path = exe.hasPrefix("/") ? exe : PathText.appending(exe, to: setup.pluginsDir)
            guard FilePermissions.isExecutableFile(path) else {
                throw o.error("command", "\(o.what): \(path) is not an executable file")
            }
            program = path
        } else {
            program = ProcessRunner.lookUp(exe)
        }
        // Executables directly in plugins_dir were checked when it was scanned; anything else
        // (a subfolder, another directory, $PATH) is checked here, up to plugins_dir.
        let pluginsDir = FileTrust.realPath(setup.pluginsDir)
        if let program, let real = FileTrust.realPath(program), PathText.parent(real) != pluginsDir,
            let untrusted = o.untrustedCommand(real, stopAt: Set([pluginsDir].compactMap { $0 }))
        {
            throw untrusted
        }
        return ExecProvider(command: command, format: format, directory: setup.pluginsDir, sourceName: setup.sourceName)
    }

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        var env = ProcessInfo.processInfo.environment
        env["TIDINGS_SOURCE"] = sourceName
        let out: ProcessRunner.Output
        do {
            out = try await ProcessRunner.run(command, directory: directory, environment: env, timeout: ctx.timeout, maxOutput: ctx.maxBody)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw PollError(.transient, "\(error)")
        }
        let stderr = String(decoding: out.stderr, as: UTF8.self).trimmed()
        let reason = stderr.isEmpty ? "" : ": \(lastLine(stderr))"
        if out.truncated && out.termination != .timedOut { throw PollError(.transient, "\(command[0]) wrote more than max_body (\(ctx.maxBody) bytes)") }
        switch (format, out.termination) {
        case (_, .timedOut):
            throw PollError(.transient, "\(command[0]) timed out after \(DurationParser.format(ctx.timeout)) and was killed")
        case (_, .signaled(let signal)):
            throw PollError(.transient, "\(command[0]) was killed by signal \(signal)\(reason)")
        case (.jsonl, .exited(0)):
            return .snapshot(try Self.parseJSONLines(out.stdout))
        case (.text, .exited(0)):
            return .snapshot([Self.textItem(stdout: out.stdout, name: sourceName)])
        case (.jsonl, .exited(let status)), (.text, .exited(let status)):
            throw PollError(.transient, "\(command[0]) exited with status \(status)\(reason)")
        case (.nagios, .exited(let status)) where (0...3).contains(status):
            return .snapshot([Self.nagiosItem(status: status, stdout: out.stdout, name: sourceName)])
        case (.nagios, .exited(let status)):
            throw PollError(.transient, "\(command[0]) exited with status \(status) (monitoring plugins use 0-3)\(reason)")
        }
    }

    /// `format = "text"`: a changed output is a `changed` event with the diff as its body.
    package func describe(_ event: inout Event, change: ItemChange, firstSeen: Date) {
        if format == .text { TextChange.describe(&event, change: change) }
    }

    private func lastLine(_ s: String) -> String { String(s.split(separator: "\n").last ?? "") }

    /// Parses the JSON-lines protocol; a bad line fails the poll and names the line.
    package static func parseJSONLines(_ data: Data) throws -> [Item] {
        var items: [Item] = []
        for (i, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
            let text = line.trimmed(newlines: false)
            if text.isEmpty { continue }
            let v: JSONValue
            do { v = try JSONValue.parse(Data(text.utf8)) } catch {
                throw PollError(.transient, "plugin output line \(i + 1): \(error)")
            }
            guard case .object = v, let key = v["key"]?.stringValue, !key.isEmpty else {
                throw PollError(.transient, "plugin output line \(i + 1): expected a JSON object with a \"key\"")
            }
            guard let title = v["title"]?.stringValue else {
                throw PollError(.transient, "plugin output line \(i + 1): missing \"title\"")
            }
            items.append(
                Item(
                    key: key, kind: v["kind"]?.stringValue ?? "item", title: title, body: v["body"]?.stringValue ?? "",
                    url: v["url"]?.stringValue, severity: Severity(lenient: v["severity"]?.stringValue),
                    data: v["data"].flatMap { $0.objectValue != nil ? $0 : nil } ?? .object([:]),
                    fingerprint: v["fingerprint"]?.stringValue))
        }
        return items
    }

    /// One item per source; its fingerprint is the state, so only transitions are events.
    /// The first line is the title, the long text (lines 2 and later) the body, and the
    /// performance data is parsed into `data.perfdata`.
    package static func nagiosItem(status: Int32, stdout: Data, name: String) -> Item {
        let states = ["OK", "WARNING", "CRITICAL", "UNKNOWN"]
        let state = states[Int(status)]
        let output = NagiosOutput(parsing: String(decoding: stdout, as: UTF8.self))
        let severity: Severity = status == 0 ? .info : status == 2 ? .critical : .warning
        return Item(
            key: "status", kind: "check", title: output.text.isEmpty ? "\(name) \(state)" : output.text, body: output.longText,
            severity: severity,
            data: ["state": .string(state), "exit_code": .number(Double(status)), "perfdata": .array(output.perfdata.map(\.json))],
            fingerprint: state)
    }
}
