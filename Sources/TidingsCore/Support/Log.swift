import Foundation
import Logging
import Synchronization

/// Logging setup: one line per message on stderr, secrets scrubbed, remote text escaped.
public enum Log {
    public static func logger(_ label: String) -> Logger { Logger(label: label) }

    private static let warned = Mutex<Set<String>>([])

    /// Logs a warning the first time `key` is seen in this process (a finding about a source's
    /// configuration that every poll would otherwise repeat).
    package static func warnOnce(_ key: String, _ message: @autoclosure () -> String, logger: Logger) {
        if warned.withLock({ $0.insert(key).inserted }) { logger.warning("\(message())") }
    }

    private static let bootstrapped = Mutex(false)

    /// Installs ``StderrLogHandler`` once per process.
    public static func bootstrap(level: Logger.Level) {
        let first = bootstrapped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            var h = StderrLogHandler(label: label)
            h.logLevel = level
            return h
        }
    }
}

/// `2026-11-22T10:00:00Z warning [source=foo] poll failed: …` on stderr.
public struct StderrLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(
        level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
        file: String, function: String, line: UInt
    ) {
        var all = metadata
        explicit?.forEach { all[$0] = $1 }
        FileHandle.standardError.write(Data(Self.line(at: Date(), level: level, metadata: all, message: "\(message)").utf8))
    }

    /// One log line, newline-terminated: secrets scrubbed, then the whole text (metadata values
    /// and the message may quote remote text) through ``TerminalText/line(_:)``, so a message
    /// can neither drive the terminal nor forge a second log line.
    static func line(at date: Date, level: Logger.Level, metadata: Logger.Metadata, message: String) -> String {
        let meta = metadata.isEmpty ? "" : " " + metadata.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " ")
        return "\(Timestamp.format(date)) \(TerminalText.line(Redactor.shared.scrub("\(level)\(meta) \(message)")))\n"
    }
}
