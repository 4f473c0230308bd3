import FoundationEssentials
import Glibc
import Logging
import Synchronization

/// Logging setup: one line per message on stderr, secrets scrubbed, remote text escaped.
package enum Log {
    package static func logger(_ label: String) -> Logger { Logger(label: label) }

    private static let warned = Mutex<Set<String>>([])

    /// Logs a warning the first time `key` is seen in this process (a finding about a source's
    /// configuration that every poll would otherwise repeat).
    package static func warnOnce(_ key: String, _ message: @autoclosure () -> String, logger: Logger) {
        if warned.withLock({ $0.insert(key).inserted }) { logger.warning("\(message())") }
    }

    private static let bootstrapped = Mutex(false)

    /// Installs ``StderrLogHandler`` once per process.
    package static func bootstrap(level: Logger.Level) {
        let first = bootstrapped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        let destination = stderrDestination
        LoggingSystem.bootstrap { label in
            var h = StderrLogHandler(label: label, destination: destination)
            h.logLevel = level
            return h
        }
    }

    /// Where this process's stderr goes, found once.
    package static let stderrDestination = LogDestination.of(fileDescriptor: STDERR_FILENO)
}

/// What reads stderr, which decides how a log line starts.
package enum LogDestination: Sendable, Equatable {
    /// A terminal, a file or a pipe: each line starts with its UTC time.
    case plain
    /// journald: each line starts with its syslog priority (`<4>`), which the journal keeps
    /// as the entry's PRIORITY, and no time (the journal stamps each entry itself).
    case journal

    /// `.journal` when `$JOURNAL_STREAM` ("DEVICE:INODE", set by systemd when it connects
    /// stdout or stderr to the journal) names the file `fd` is open on; a child whose stderr
    /// was redirected elsewhere inherits the variable but not the stream, and stays plain.
    package static func of(
        fileDescriptor fd: Int32, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> LogDestination {
        guard let stream = environment["JOURNAL_STREAM"] else { return .plain }
        let parts = stream.split(separator: ":", omittingEmptySubsequences: false)
        var st = stat()
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]), fstat(fd, &st) == 0 else { return .plain }
        return UInt64(st.st_dev) == dev && UInt64(st.st_ino) == ino ? .journal : .plain
    }

    /// The sd-daemon(3) prefix for `level`: syslog priorities (debug 7 … critical 2).
    package static func priority(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: return "<7>"
        case .info: return "<6>"
        case .notice: return "<5>"
        case .warning: return "<4>"
        case .error: return "<3>"
        case .critical: return "<2>"
        }
    }
}

/// `2026-11-22T10:00:00Z warning [source=foo] poll failed: …` on stderr; under journald
/// `<4>warning [source=foo] poll failed: …`.
package struct StderrLogHandler: LogHandler {
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .info
    let label: String
    let destination: LogDestination

    package init(label: String) { self.init(label: label, destination: .plain) }

    package init(label: String, destination: LogDestination) {
        self.label = label
        self.destination = destination
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var all = metadata
        event.metadata?.forEach { all[$0] = $1 }
        writeAll(STDERR_FILENO, Array(Self.line(at: Date(), level: event.level, metadata: all, message: "\(event.message)", destination: destination).utf8))
    }

    /// One log line, newline-terminated: secrets scrubbed, then the whole text (metadata values
    /// and the message may quote remote text) through ``TerminalText/line(_:)``, so a message
    /// can neither drive the terminal nor forge a second log line.
    static func line(
        at date: Date, level: Logger.Level, metadata: Logger.Metadata, message: String, destination: LogDestination = .plain
    ) -> String {
        let meta = metadata.isEmpty ? "" : " " + metadata.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " ")
        let text = TerminalText.line(Redactor.shared.scrub("\(level)\(meta) \(message)"))
        switch destination {
        case .plain: return "\(Timestamp.format(date)) \(text)\n"
        case .journal: return "\(LogDestination.priority(level))\(text)\n"
        }
    }
}
