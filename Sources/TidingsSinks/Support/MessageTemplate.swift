import Foundation
import Mustache
import TidingsCore

/// The markup a channel renders, and so how remote text is escaped into it by `{{name}}`
/// (`{{{name}}}` inserts it unescaped, as Mustache does).
package enum Markup: String, Sendable, CaseIterable {
    /// Shown as it is (ntfy and Gotify without markdown, e-mail text, apprise).
    case plain = "TIDINGS_PLAIN"
    /// HTML: `& < > " '` escaped (Telegram `parse_mode=HTML`, Matrix `formatted_body`, Pushover `html=1`).
    case html = "TIDINGS_HTML"
    /// Markdown (Discord, ntfy `Markdown: yes`): the characters that start formatting are
    /// backslash-escaped, so remote text cannot make links, mentions or headings.
    case markdown = "TIDINGS_MARKDOWN"
    /// Slack `mrkdwn`: `& < >` as entities, as Slack documents (so `<!channel>` cannot ping).
    case slack = "TIDINGS_SLACK"

    package func escape(_ text: String) -> String {
        switch self {
        case .plain:
            return text
        case .html:
            var out = ""
            out.reserveCapacity(text.utf8.count)
            for c in text {
                switch c {
                case "&": out += "&amp;"
                case "<": out += "&lt;"
                case ">": out += "&gt;"
                case "\"": out += "&quot;"
                case "'": out += "&#39;"
                default: out.append(c)
                }
            }
            return out
        case .markdown:
            var out = ""
            out.reserveCapacity(text.utf8.count)
            for c in text {
                if "\\`*_{}[]()<>#+-.!|~@".contains(c) { out.append("\\") }
                out.append(c)
            }
            return out
        case .slack:
            return text.replacingOccurrences(of: "&", with: "&amp;")
                .replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
        }
    }

    /// Mustache's escaping for this markup, registered once under ``rawValue`` for the
    /// `CONTENT_TYPE` pragma each template starts with.
    private struct ContentType: MustacheContentType {
        var markup: Markup
        func escapeText(_ text: String) -> String { markup.escape(text) }
    }

    fileprivate static let registered: Void = {
        for m in Markup.allCases { MustacheContentTypes.register(ContentType(markup: m), named: m.rawValue) }
    }()
}

/// One message template of a sink (`title_template`, `body_template`, `subject_template`…):
/// Mustache, rendered with the event JSON (DESIGN §4, `data` included) as its context.
///
/// A missing field renders empty; a template that does not parse is a config error at the
/// option's line. Without the option the channel's default applies, so no template is needed.
package struct MessageTemplate: Sendable {
    private let template: MustacheTemplate
    /// The template text as written (without the markup pragma), for messages.
    package let source: String

    /// Parses `source` for `markup`; throws Mustache's parser error.
    package init(_ source: String, markup: Markup) throws {
        _ = Markup.registered
        self.source = source
        // The pragma goes on the first line without a newline, so line numbers stay the user's.
        template = try MustacheTemplate(string: "{{% CONTENT_TYPE: \(markup.rawValue)}}" + source)
    }

    /// Reads option `key` (a string) from a sink's table, else uses `fallback`.
    package static func option(_ o: OptionReader, _ key: String, default fallback: String, markup: Markup) throws -> MessageTemplate {
        guard let text = try o.string(key) else { return try MessageTemplate(fallback, markup: markup) }
        do {
            return try MessageTemplate(text, markup: markup)
        } catch let e as MustacheTemplate.ParserError {
            throw o.error(key, "\(o.what): '\(key)' is not a valid Mustache template: \(e.error) at line \(e.context.lineNumber), column \(e.context.columnNumber)")
        } catch {
            throw o.error(key, "\(o.what): '\(key)' is not a valid Mustache template: \(error)")
        }
    }

    /// The text for `event`.
    package func render(_ event: Event) -> String {
        template.render(Self.context(event))
    }

    /// The event JSON as Mustache sees it: dictionaries, arrays, strings, numbers, booleans.
    static func context(_ event: Event) -> Any {
        (try? JSONSerialization.jsonObject(with: Data(event.jsonLine().utf8))) ?? [String: Any]()
    }
}
