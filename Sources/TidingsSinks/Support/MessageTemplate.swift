import Foundation
import Mustache
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
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
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
    private let template: MustacheTemplate
    /// The template text as written (without the markup pragma), for messages.
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
        _ = Markup.registered
        self.source = source
        self.markup = markup
        // The pragma goes on the first line without a newline, so line numbers stay the user's.
        let pragma = "{{% CONTENT_TYPE: \(markup.rawValue)}}"
        do {
            template = try MustacheTemplate(string: pragma + source)
        } catch let e as MustacheTemplate.ParserError {
            let line = e.context.lineNumber
            let column = line == 1 ? max(1, e.context.columnNumber - pragma.count) : e.context.columnNumber
            throw SyntaxError(line: line, column: column, reason: Self.reason(e.error))
        } catch {
            throw SyntaxError(line: 1, column: 1, reason: "\(error)")
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
        let budget = RenderBudget(bytes: Self.maxRenderedBytes, perRepetition: max(source.utf8.count, 16))
        let text = template.render(TemplateObject(event.jsonObject.objectValue ?? [:], budget))
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

    private static func reason(_ error: any Error) -> String {
        switch error {
        case MustacheTemplate.Error.sectionCloseNameIncorrect: return "a closing tag {{/…}} does not match the section it closes"
        case MustacheTemplate.Error.unfinishedName: return "a tag is not finished (a name and then }} expected)"
        case MustacheTemplate.Error.expectedSectionEnd: return "a section is never closed ({{/name}} missing)"
        case MustacheTemplate.Error.invalidSetDelimiter: return "invalid set-delimiter tag ({{=<% %>=}} is the form)"
        case MustacheTemplate.Error.transformAppliedToInheritanceSection, MustacheTemplate.Error.illegalTokenInsideInheritSection,
            MustacheTemplate.Error.textInsideInheritSection:
            return "invalid inheritance tag ({{<…}}, {{$…}}): templates here have no partials to inherit from"
        case MustacheTemplate.Error.invalidConfigVariableSyntax, MustacheTemplate.Error.unrecognisedConfigVariable:
            return "unknown pragma {{%…}}"
        default: return "the template ends inside a tag ({{ without }})"
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
        guard let keyRange = line.range(of: key) else { return nil }
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

// MARK: - The context: the event JSON, read lazily and within a budget

/// What one rendering may still write. Shared by every value of one rendering (Mustache renders
/// synchronously on the caller's thread), so a section repeated over a large array, or nested
/// sections over the same array, stop once the budget is spent instead of multiplying output.
final class RenderBudget {
    private(set) var remaining: Int
    /// What one repetition of a section costs: the template's length, the most text a
    /// repetition adds besides the values it inserts (which pay for themselves).
    let perRepetition: Int

    init(bytes: Int, perRepetition: Int) {
        remaining = bytes
        self.perRepetition = perRepetition
    }

    var isSpent: Bool { remaining <= 0 }

    /// `text`, paid for; "" once the budget is spent.
    func take(_ text: String) -> String {
        guard !isSpent else { return "" }
        remaining -= text.utf8.count
        return text
    }

    /// Pays for one more repetition of a section; false once the budget is spent.
    func repeatSection() -> Bool {
        guard !isSpent else { return false }
        remaining -= perRepetition
        return true
    }
}

/// How a JSON value appears to Mustache: strings, numbers and booleans as themselves, `null` as
/// missing, objects and arrays as lazy views (nothing is converted until a template names it,
/// so a deeply nested `data` costs only what the template walks).
private func templateValue(_ v: JSONValue, _ budget: RenderBudget) -> Any {
    switch v {
    case .null: return NSNull()  // found (so lookup stops here), renders empty, false in a section
    case .bool(let b): return b
    case .number(let n):
        // Integers as Int (Mustache's integer transforms apply; below 2^53, so `plusone` cannot overflow).
        if n.rounded() == n, abs(n) < 1e15 { return Int(n) }
        return n
    case .string(let s): return TemplateText(s, budget)
    case .array(let a): return TemplateList(a, budget)
    case .object(let o): return TemplateObject(o, budget)
    }
}

/// A string: rendered within the budget; empty is false in a section; String's transforms
/// (`{{uppercased(title)}}`) apply and their results stay budgeted.
private struct TemplateText: MustacheCustomRenderable, MustacheTransformable {
    let text: String
    let budget: RenderBudget
    init(_ text: String, _ budget: RenderBudget) {
        self.text = text
        self.budget = budget
    }

    var renderText: String { budget.take(text) }
    var isNull: Bool { text.isEmpty }

    func transform(_ name: String) -> Any? {
        switch text.transform(name) {
        case let s as String: return TemplateText(s, budget)
        case let s as Substring: return TemplateText(String(s), budget)
        case let other: return other
        }
    }
}

/// An object: members by name (`{{data.x}}`), itself as compact JSON (`{{{data}}}`).
private struct TemplateObject: MustacheParent, MustacheCustomRenderable, MustacheTransformable {
    let members: [String: JSONValue]
    let budget: RenderBudget
    init(_ members: [String: JSONValue], _ budget: RenderBudget) {
        self.members = members
        self.budget = budget
    }

    func child(named name: String) -> Any? { members[name].map { templateValue($0, budget) } }
    var renderText: String { budget.isSpent ? "" : budget.take(JSONValue.object(members).jsonString()) }
    var isNull: Bool { false }

    /// `count`, `empty`, and `enumerated` / `sorted`: the members as `{key, value}` in key order.
    func transform(_ name: String) -> Any? {
        switch name {
        case "count": return members.count
        case "empty": return members.isEmpty
        case "enumerated", "sorted":
            let entries = members.keys.sorted().map { JSONValue.object(["key": .string($0), "value": members[$0]!]) }
            return TemplateList(entries, budget)
        default: return nil
        }
    }
}

/// An array: a section repeats per element (each repetition paid for), itself as compact JSON.
private struct TemplateList: MustacheSequence, MustacheCustomRenderable, MustacheTransformable {
    let elements: [JSONValue]
    let budget: RenderBudget
    init(_ elements: [JSONValue], _ budget: RenderBudget) {
        self.elements = elements
        self.budget = budget
    }

    struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[JSONValue]>
        let budget: RenderBudget
        mutating func next() -> Any? {
            guard let v = base.next(), budget.repeatSection() else { return nil }
            return templateValue(v, budget)
        }
    }

    func makeIterator() -> Iterator { Iterator(base: elements.makeIterator(), budget: budget) }
    var renderText: String { budget.isSpent ? "" : budget.take(JSONValue.array(elements).jsonString()) }
    var isNull: Bool { elements.isEmpty }

    /// `first`, `last`, `count`, `empty`, `reversed`, as for Mustache's own arrays.
    func transform(_ name: String) -> Any? {
        switch name {
        case "first": return elements.first.map { templateValue($0, budget) }
        case "last": return elements.last.map { templateValue($0, budget) }
        case "count": return elements.count
        case "empty": return elements.isEmpty
        case "reversed": return TemplateList(elements.reversed(), budget)
        default: return nil
        }
    }
}
