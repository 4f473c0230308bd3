import FoundationEssentials
import Glibc
import Synchronization
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "stdout"`: one line per event on standard output, `format = "text"` or `"json"`.
///
/// In text format the title and body parts of the line come from `title_template` (default
/// `{{title}}`) and `body_template` (default `{{body}}`), plain text made safe for the terminal
/// as every line is (``EventFormatter``). JSON lines are the event itself (DESIGN §4): no templates.
package struct StdoutSink: Sink, TemplatedSink {
    package enum Format: String, Sendable { case text, json }
    package var format: Format
    package var formatter: EventFormatter
    /// The line's title part.
    package var titleTemplate = MessageTemplate.builtin(Self.defaultTitle, markup: .plain)
    /// The line's body part.
    package var bodyTemplate = MessageTemplate.builtin(Self.defaultBody, markup: .plain)
    package static let defaultTitle = "{{title}}"
    package static let defaultBody = "{{body}}"
    private static let lock = Mutex(())

    package init(format: Format, color: Bool) {
        self.format = format
        self.formatter = EventFormatter(color: color)
    }

    package static let factory = SinkFactory(type: "stdout", summary: "print events on standard output (text or JSON lines)") { o, _ in
        let name = try o.string("format") ?? "text"
        guard let format = Format(rawValue: name) else {
            throw o.error("format", "\(o.what): 'format' must be \"text\" or \"json\", not \"\(name)\"")
        }
        var sink = StdoutSink(format: format, color: EventFormatter.wantsColor(fileDescriptor: STDOUT_FILENO))
        if format == .json, let key = ["title_template", "body_template"].first(where: o.has) {
            throw o.error(key, "\(o.what): '\(key)' applies to format = \"text\"; JSON lines are the event itself")
        }
        let templates = try MessageTemplate.options(o, [("title_template", defaultTitle, .plain), ("body_template", defaultBody, .plain)])
        (sink.titleTemplate, sink.bodyTemplate) = (templates[0], templates[1])
        return sink
    }

    package var templates: KeyValuePairs<String, MessageTemplate> {
        ["title_template": titleTemplate, "body_template": bodyTemplate]
    }

    package func deliver(_ events: [Event]) async throws {
        let text = events.map { format == .json ? $0.jsonLine() : formatter.line(shown($0)) }.joined(separator: "\n") + "\n"
        try Self.lock.withLock { _ in
            if let failure = Self.writeAll(Array(text.utf8), to: STDOUT_FILENO) {
                throw DeliveryError(.retryable, "cannot write to stdout: \(String(cString: strerror(failure)))")
            }
        }
    }

    /// Writes all of `bytes` to `fd` (a short write or EINTR goes on); nil, or the errno that
    /// stopped it.
    static func writeAll(_ bytes: [UInt8], to fd: Int32) -> Int32? {
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        return nil
    }

    /// `e` with the title and body the templates make of it.
    func shown(_ e: Event) -> Event {
        var shown = e
        shown.title = titleTemplate.render(e)
        shown.body = bodyTemplate.render(e)
        return shown
    }
}
