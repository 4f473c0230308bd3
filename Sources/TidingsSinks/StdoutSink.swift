import Foundation
import Synchronization
import TidingsCore

/// `type = "stdout"`: one line per event on standard output, `format = "text"` or `"json"`.
public struct StdoutSink: Sink {
    public enum Format: String, Sendable { case text, json }
    public var format: Format
    public var formatter: EventFormatter
    private static let lock = Mutex(())

    public init(format: Format, color: Bool) {
        self.format = format
        self.formatter = EventFormatter(color: color)
    }

    public static let factory = SinkFactory(type: "stdout", summary: "print events on standard output (text or JSON lines)") { o, _ in
        let name = try o.string("format") ?? "text"
        guard let format = Format(rawValue: name) else {
            throw o.error("format", "\(o.what): 'format' must be \"text\" or \"json\", not \"\(name)\"")
        }
        return StdoutSink(format: format, color: EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO))
    }

    public func deliver(_ events: [Event]) async throws {
        let text = events.map { format == .json ? $0.jsonLine() : formatter.line($0) }.joined(separator: "\n") + "\n"
        try Self.lock.withLock { _ in
            do {
                try FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
            } catch {
                throw DeliveryError(.retryable, "cannot write to stdout: \(error.localizedDescription)")
            }
        }
    }
}
