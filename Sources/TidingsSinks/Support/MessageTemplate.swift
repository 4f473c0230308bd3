import FoundationEssentials
import TidingsTemplates
import TidingsPOSIX
import TidingsPluginAPI

/// The markup a channel renders, and so how remote text is escaped into it by `{{name}}`
/// (`{{{name}}}` inserts it unescaped, as Mustache does).
package enum Markup: String, Sendable, CaseIterable {
    /// Shown as it is (ntfy and Gotify without markdown, e-mail text, apprise, the terminal).
    case plain = "TIDINGS_PLAIN"
    /// HTML: `& < > " '` escaped (Telegram `parse_mode=HTML`, Matrix `formatted_body`, Pushover `html=1`).
    case html = "TIDINGS_HTML"
    /// Markdown (Discord, ntfy `Markdown: yes`): the characters that start formatting are
    /// backslash-escaped, so remote text cannot make links, mentions or headings.
    case markdown = "TIDINGS_MARKDOWN"
    /// Slack `mrkdwn`: `& < >` as entities, as Slack documents (so `<!channel>` cannot ping),
    /// and a word joiner after `@` (so `@channel` cannot ping on Mattermost or Rocket.Chat).
    case slack = "TIDINGS_SLACK"
    /// Inside a JSON string (a webhook `body_template` sent as JSON): `"`, `\` and control
    /// characters escaped, so `"{{title}}"` is always exactly one valid JSON string.
    case json = "TIDINGS_JSON"
    /// A freedesktop notification body, which servers with the `body-markup` capability parse
    /// as a small HTML subset: `& < >` as entities, nothing else touched.
    case notification = "TIDINGS_NOTIFICATION"

    package func escape(_ text: String) -> String {
        switch self {
        case .plain:
            return text
        case .html:
            return Self.mapped(text) { c in
                switch c {
                case "&": return "&amp;"
                case "<": return "&lt;"
                case ">": return "&gt;"
                case "\"": return "&quot;"
                case "'": return "&#39;"
                default: return nil
                }
            }
        case .markdown:
            return Self.mapped(text) { c in "\\`*_{}[]()<>#+-.!|~@".contains(c) ? "\\" + String(c) : nil }
        case .slack:
            // Mattermost and Rocket.Chat take the Slack shape but ping on a plain `@channel`,
            // `@here`, `@all` or `@user`: a word joiner after `@` keeps the text and drops the ping.
            return Self.mapped(text) { c in
                switch c {
                case "&": return "&amp;"
                case "<": return "&lt;"
                case ">": return "&gt;"
                case "@": return "@\u{2060}"
                default: return nil
                }
            }
        case .notification:
            return Self.mapped(text) { c in
                switch c {
                case "&": return "&amp;"
                case "<": return "&lt;"
                case ">": return "&gt;"
                default: return nil
                }
            }
        case .json:
            return SecretForms.jsonEscaped(text, [])
        }
    }

    /// The markup a request body of `contentType` is written in: JSON for `application/json`
    /// and `application/*+json`, HTML for `text/html`, else plain.
    package static func forContentType(_ contentType: String) -> Markup {
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmed(newlines: false).lowercased() } ?? ""
        if type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json")) { return .json }
        if type == "text/html" { return .html }
        return .plain
    }

    /// `text` with each character `replacement` names replaced.
    private static func mapped(_ text: String, _ replacement: (Character) -> String?) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            if let r = replacement(c) { out += r } else { out.append(c) }
        }
        return out
    }

    /// The escapes `{{% CONTENT_TYPE: name}}` may switch to, by ``rawValue``.
    static let contentTypes: [String: TemplateEscape] = Dictionary(uniqueKeysWithValues: allCases.map { m in (m.rawValue, { @Sendable t in m.escape(t) }) })
}

/// One message template of a sink (`title_template`, `body_template`, `subject_template`…):
/// Mustache, rendered with the event JSON (DESIGN §4, `data` included) as its context.
///
/// - A missing field renders empty; so do `null` and partials (`{{> name}}`: there is no
///   library of partials). An empty string is false in a section, so
///   `{{#url}}…{{/url}}` shows only when the event has a URL.
/// - `{{data.a.b}}` walks into objects; `{{#data.list}}…{{/data.list}}` repeats per element;
///   an object or array itself (`{{data}}`) renders as its compact JSON.
/// - The output is bounded: at most ``maxRenderedBytes`` (cut on a character boundary,
///   ending in "…"), and a section's repetitions stop once that much is written, so no event
///   can make a template render for long.
///
/// A template that does not parse is a config error at the failing line (see ``option(_:_:default:markup:)``).
/// Without the option the channel's default applies, so no template is needed.
package struct MessageTemplate: Sendable, Equatable {
    private let template: Template
    /// The template text as written, for messages.
    package let source: String
    /// How `{{name}}` escapes what it inserts.
    package let markup: Markup

    /// The most a rendering yields, in UTF-8 bytes: far above any channel's own limit (which the
    /// channel cuts to), and room for a webhook body carrying a whole event.
    package static let maxRenderedBytes = 1 << 20

    /// Why a template does not parse, and where in the template.
    package struct SyntaxError: Error, CustomStringConvertible, Sendable, Equatable {
        /// 1-based, in the template's text.
        package var line: Int
        package var column: Int
        package var reason: String
        package var description: String { "\(reason) (template line \(line), column \(column))" }
    }

    /// Parses `source` for `markup`; throws ``SyntaxError``.
    package init(_ source: String, markup: Markup) throws(SyntaxError) {
        self.source = source
        self.markup = markup
        do {
            // As behind the markup pragma swift-mustache needed: a blank line 1 goes, line 1's tags are not standalone.
            template = try Template(source, contentTypes: Markup.contentTypes, firstLineStandalone: false)
        } catch {
            throw SyntaxError(line: error.line, column: error.column, reason: Self.reason(error.kind))
        }
    }

    /// A template the code supplies (a sink's default): it parses, or the code is wrong.
    package static func builtin(_ source: String, markup: Markup) -> MessageTemplate {
        do { return try MessageTemplate(source, markup: markup) } catch { preconditionFailure("built-in template \(source): \(error)") }
    }

    /// The same template escaping for `other` instead (it parsed once, so it parses again).
    package func with(markup other: Markup) -> MessageTemplate {
        guard other != markup, let t = try? MessageTemplate(source, markup: other) else { return self }
        return t
    }

    package static func == (a: MessageTemplate, b: MessageTemplate) -> Bool { a.source == b.source && a.markup == b.markup }

    /// Reads option `key` (a string) from a sink's table, else uses `fallback` (a ``builtin(_:markup:)``).
    /// A template that does not parse is a config error at its failing line: the option's
    /// line plus the template line for a multi-line string (`"""` / `'''`) whose lines are
    /// the file's, else the option's line.
    package static func option(_ o: OptionReader, _ key: String, default fallback: String, markup: Markup) throws -> MessageTemplate {
        guard let text = try o.string(key) else { return builtin(fallback, markup: markup) }
        do {
            return try MessageTemplate(text, markup: markup)
        } catch {
            let optionLine = o.table[key]?.line
            let line = optionLine.flatMap { TemplatePlacement(file: o.file, optionLine: $0, key: key)?.fileLine(of: error.line, in: text) }
            throw ConfigError(file: o.file, line: line ?? optionLine ?? o.table.line, "\(o.what): '\(key)' is not a valid Mustache template: \(error)")
        }
    }

    /// Each option of `keys` read as ``option(_:_:default:markup:)`` does, every error reported
    /// (a sink with two broken templates names both).
    package static func options(_ o: OptionReader, _ keys: [(key: String, default: String, markup: Markup)]) throws -> [MessageTemplate] {
        var templates: [MessageTemplate] = []
        var errors: [ConfigError] = []
        for k in keys {
            do { templates.append(try option(o, k.key, default: k.default, markup: k.markup)) } catch let e as ConfigError { errors.append(e) }
        }
        if !errors.isEmpty { throw ConfigErrors(errors) }
        return templates
    }

    /// The text for `event`, at most ``maxRenderedBytes``.
    package func render(_ event: Event) -> String {
        let budget = TemplateBudget(bytes: Self.maxRenderedBytes, perRepetition: max(source.utf8.count, 16))
        let escape = markup
        let text = template.render(
            templateValue(.object(event.jsonObject.objectValue ?? [:])), escape: { escape.escape($0) }, budget: budget,
            contentTypes: Markup.contentTypes)
        return text.cut(utf8Bytes: Self.maxRenderedBytes)
    }

    /// An event with every field set, and text that needs escaping in each markup (quotes, a
    /// backslash, a line break, `<b>`, `*`): what config checks render templates against.
    package static let sampleEvent = Event(
        id: "01J0SAMPLE0000000000000000", source: "sample", provider: "exec", kind: "message", event: .new, key: "sample-1",
        title: #"A "sample" title <b>&</b> \ *it*"#, body: "line one\nline two", url: "https://example.org/item/1",
        severity: .warning, observedAt: Date(timeIntervalSince1970: 1_790_000_000),
        data: ["count": 3, "flag": true, "name": "n\u{e4}me", "list": ["a", "b"], "nested": ["x": 1.5]])

    /// Why this template, rendered for ``sampleEvent``, is not one JSON value; nil when it is.
    package func jsonProblem() -> String? {
        do {
            _ = try JSONValue.parse(Data(render(Self.sampleEvent).utf8))
            return nil
        } catch {
            return "\(error)"
        }
    }

    private static func reason(_ kind: Template.ParseError.Kind) -> String {
        switch kind {
        case .sectionCloseNameIncorrect: return "a closing tag {{/…}} does not match the section it closes"
        case .unfinishedName: return "a tag is not finished (a name and then }} expected)"
        case .expectedSectionEnd: return "a section is never closed ({{/name}} missing)"
        case .invalidSetDelimiter: return "invalid set-delimiter tag ({{=<% %>=}} is the form)"
        case .transformAppliedToInheritanceSection, .illegalTokenInsideInheritSection:
            return "invalid inheritance tag ({{<…}}, {{$…}}): templates here have no partials to inherit from"
        case .invalidConfigVariableSyntax, .unrecognisedConfigVariable:
            return "unknown pragma {{%…}}"
        case .unexpectedEnd: return "the template ends inside a tag ({{ without }})"
        }
    }
}

/// A sink whose messages come from ``MessageTemplate``s: `tidings sinks test` shows what each
/// renders for its test event.
package protocol TemplatedSink: Sink {
    /// The templates by option name (`title_template`, `body_template`…), in the order shown.
    var templates: KeyValuePairs<String, MessageTemplate> { get }
}

/// Where a template option's text sits in its config file: maps template lines to file lines
/// when the file holds the template verbatim, line for line (a multi-line `"""` or `'''` string
/// without escapes or line-ending backslashes up to the line in question).
struct TemplatePlacement {
    /// The file's lines, line breaks removed.
    let lines: [Substring]
    /// The file line holding template line 1, and what of it belongs to the template.
    let firstLine: Int
    let firstText: Substring

    init?(file: String, optionLine: Int, key: String) {
        guard let data = FileManager.default.contents(atPath: file), data.count <= 16 << 20 else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        guard optionLine >= 1, optionLine <= lines.count else { return nil }
        let line = lines[optionLine - 1]
        // `key = """…` (possibly quoted, possibly inside an inline table); only multi-line strings map.
        guard let keyRange = line.firstRange(of: key) else { return nil }
        let afterKey = line[keyRange.upperBound...].drop(while: { $0 == " " || $0 == "\t" || $0 == "\"" })
        guard afterKey.first == "=" else { return nil }
        let value = afterKey.dropFirst().drop(while: { $0 == " " || $0 == "\t" })
        guard value.hasPrefix("\"\"\"") || value.hasPrefix("'''") else { return nil }
        let rest = value.dropFirst(3)
        // TOML trims a line break right after the opening delimiter.
        if rest.isEmpty {
            firstLine = optionLine + 1
            guard firstLine <= lines.count else { return nil }
            firstText = lines[firstLine - 1]
        } else {
            firstLine = optionLine
            firstText = rest
        }
    }

    /// The file line of template line `n`, or nil when the file's lines up to it are not the template's.
    func fileLine(of n: Int, in template: String) -> Int? {
        let templateLines = template.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? $0.dropLast() : $0 }
        guard n >= 1, n <= templateLines.count, firstLine + n - 1 <= lines.count else { return nil }
        for i in 0..<n {
            let raw = i == 0 ? firstText : lines[firstLine - 1 + i]
            let t = templateLines[i]
            // Each line is the template's; the last one may go on with the closing delimiter.
            guard raw.hasPrefix(t), i == templateLines.count - 1 || raw.count == t.count else { return nil }
        }
        return firstLine + n - 1
    }
}

// MARK: - The context: the event JSON, read lazily

/// An array, itself (and reversed) rendering as compact JSON.
private func templateList(_ a: [JSONValue]) -> TemplateList {
    TemplateList(
        count: a.count, element: { templateValue(a[$0]) }, text: { JSONValue.array(a).jsonString() },
        reversed: { templateList(a.reversed()) })
}

/// How a JSON value appears to a template: strings, numbers and booleans as themselves, `null`
/// as found-but-empty, objects and arrays as lazy views (nothing is converted until a template
/// names it, so a deeply nested `data` costs only what the template walks), rendering
/// themselves as compact JSON.
private func templateValue(_ v: JSONValue) -> TemplateValue {
    switch v {
    case .null: return .null
    case .bool(let b): return .bool(b)
    case .number(let n):
        // Integers as Int (the integer transforms apply; below 2^53, so `plusone` cannot overflow).
        if n.rounded() == n, abs(n) < 1e15 { return .int(Int(n)) }
        return .double(n)
    case .string(let s): return .text(s)
    case .array(let a):
        return .list(templateList(a))
    case .object(let o):
        return .object(
            TemplateObject(
                child: { o[$0].map(templateValue) }, keys: { Array(o.keys) }, text: { JSONValue.object(o).jsonString() },
                entries: { templateList(o.keys.sorted().map { JSONValue.object(["key": .string($0), "value": o[$0]!]) }) }))
    }
}
