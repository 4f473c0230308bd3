import Foundation
import Mustache
import TidingsPluginAPI
import XCTest

@testable import TidingsMonitoring
@testable import TidingsSinks
@testable import TidingsTemplates

/// Our renderer (TidingsTemplates) against swift-mustache, the oracle (a test-only dependency):
/// every shipped template and hostile inputs render to the same text with both.
final class OracleTests: XCTestCase {
    // MARK: - The sinks' message templates

    /// Every default template of a sink, and templates that use each feature docs/sinks.md names.
    static let shipped = [
        "{{title}}", "{{body}}", "{{body}}{{#url}}\n{{url}}{{/url}}", EmailSink.defaultSubject, EmailSink.defaultBody,
        StdoutSink.defaultTitle, StdoutSink.defaultBody, DesktopStyle.defaultTitle, DesktopStyle.defaultBody,
        "[{{source}}] {{title}}", "{{body}}{{#url}} ({{url}}){{/url}}", "{{severity}}: {{title}}",
        "{{data.host}} at {{data.used}}%", "{{#data.mounts}}{{path}} {{/data.mounts}}",
        "{{#url}}<{{url}}>{{/url}}{{^url}}no link{{/url}}", "{{{data}}}", "{{uppercased(severity)}}, {{count(data.mounts)}}",
        #"{"text": "*{{severity}}*: {{title}}{{#body}}\n{{body}}{{/body}}{{#url}}\n{{url}}{{/url}}"}"#,
        #"{"summary": "{{title}}", "themeColor": "{{#data.color}}{{data.color}}{{/data.color}}{{^data.color}}0076D7{{/data.color}}"}"#,
    ]

    static let hostile = [
        "{{{title}}}", "{{&title}}", "{{ title }}", "{{data.name}}", "{{#data.list}}[{{.}}]{{/data.list}}",
        "{{^data.missing}}none{{/data.missing}}", "{{^data.empty}}empty{{/data.empty}}{{#data.empty}}x{{/data.empty}}",
        "{{data}}", "{{data.list}}", "{{{data.nested}}}", "{{data.nested.x}}", "{{data.nothing}}|{{#data.nothing}}x{{/data.nothing}}|{{^data.nothing}}y{{/data.nothing}}",
        "{{#data.list}}{{#first()}}F{{/first()}}{{index()}}{{^last()}},{{/last()}}{{#even()}}e{{/even()}}{{/data.list}}",
        "a {{! a comment }} b", "{{=<% %>=}}<% title %> {{title}} <%={{ }}=%>{{body}}", "{{> missing}}x", "  {{> missing}}\n",
        "line1\r\n  {{#data.list}}\r\n  - {{.}}\r\n  {{/data.list}}\r\nend\r\n",
        "  {{! standalone }}\n  {{#data.flag}}\n yes\n  {{/data.flag}}\nend", "\t{{#data.list}}  \n{{.}}\n\t{{/data.list}}\t\n",
        "{{#data.nested}}{{x}} {{title}} {{.x}}|{{.title}}{{/data.nested}}", "{{missing.a.b}}x", "{{.}}", "{{}}",
        "{{#data.count}}{{.}} {{plusone(.)}} {{minusone(data.count)}} {{#even(.)}}even{{/even(.)}}{{/data.count}}",
        "{{lowercased(title)}}|{{reversed(title)}}|{{empty(body)}}", "{{first(data.list)}} {{last(data.list)}} {{#reversed(data.list)}}{{.}}{{/reversed(data.list)}}",
        "{{#data.flag}}T{{/data.flag}}{{^data.flag}}F{{/data.flag}}", "{{#body}}<{{.}}>{{/body}}", "{{#title}}{{title}}{{/title}}",
        "{{$block}}default {{title}}{{/block}}", "{{#sorted(data.nested)}}{{key}}={{value}};{{/sorted(data.nested)}}",
        "{{count(data.nested)}} {{uppercased(nope)}} {{count(title)}}", "{ {{title}} }} {{ {", "{{#data.objects}}{{name}}:{{#tags}}{{.}},{{/tags}};{{/data.objects}}",
        "{{#data.list}}{{#data.list}}{{.}}{{/data.list}}{{/data.list}}", "\n\n  {{title}}  \n\n", "{{#url}}\n{{url}}\n{{/url}}\n",
        "{{data.ratio}} {{data.big}} {{data.neg}} {{data.t}} {{data.f}}", "{{^data.zero}}zero is true{{/data.zero}}{{#data.zero}}{{.}}{{/data.zero}}",
        "  {{=| |=}}  \n|title|\n|={{ }}=|\n{{body}}", "{{{reversed(data.list)}}} {{sorted(data.nested)}} {{{first(sorted(data.nested))}}}", "{{#data.list}}\n  {{> p}}\n{{/data.list}}",
    ]

    /// Templates both refuse (and one of `hostile`: `{{ {` never closes).
    static let broken = [
        "{{#title}} never closed", "{\n  \"oops\": \"{{/wrong}}\"\n}", "{{a b}}", "x\n{{#a}}\n{{/b}}", "{{=<% %>}}", "{{! no end",
        "{{{title}}", "{{uppercased(title}}", "{{%NOPE: x}}", "{{<parent}}{{title}}{{/parent}}", "{{$b(x)}}{{/b(x)}}",
    ]

    static let deep: JSONValue = (0..<120).reduce(JSONValue.string("bottom")) { inner, _ in .object(["a": inner]) }

    static let events: [Event] = {
        let at = Date(timeIntervalSince1970: 1_790_000_000)
        let data: JSONValue = [
            "name": "n\u{e4}me 🎉 e\u{301} ﬃ <x>", "list": ["a", "<b>", "*c*", "@here"], "empty": [], "nested": ["x": 1.5, "y": "<&>"],
            "count": 3, "flag": true, "zero": 0, "ratio": 0.1, "big": 12345678901234, "neg": -2, "t": true, "f": false,
            "nothing": .null, "host": "db1", "used": 97, "mounts": [["path": "/var"], ["path": "/srv"]], "color": "FF0000",
            "objects": [["name": "o1", "tags": ["t1", "t2"]], ["name": "o2", "tags": []]], "deep": deep,
        ]
        return [
            MessageTemplate.sampleEvent,
            Event(source: "s", provider: "feed", kind: "item", event: .new, key: "k", title: #"<script>"&'</script> \`*_{}[]()#+-.!|~@channel"#,
                  body: "line1\r\nline2\n\u{7}", url: "https://example.org/?a=1&b=<2>", severity: .critical, observedAt: at, data: data),
            Event(source: "s", provider: "feed", kind: "item", event: .changed, key: "k2", title: "", body: "", observedAt: at),
            Event(source: "s", provider: "feed", kind: "item", event: .new, key: "k3", title: String(repeating: "<&ab>ü", count: 17_000),
                  body: String(repeating: "x", count: 100_000), observedAt: at, data: ["list": .array((0..<300).map { .number(Double($0)) })]),
        ]
    }()

    func testMessageTemplatesRenderAsSwiftMustacheDoes() throws {
        var compared = 0
        var refused = 0
        for source in Self.shipped + Self.hostile + Self.broken {
            for markup in Markup.allCases {
                // A template one refuses, the other refuses too, at the same line.
                let ours: MessageTemplate
                do {
                    ours = try MessageTemplate(source, markup: markup)
                } catch {
                    do {
                        _ = try OracleMessageTemplate(source, markup: markup)
                        XCTFail("only ours refuses \(source.debugDescription): \(error)")
                    } catch let e as MustacheTemplate.ParserError {
                        XCTAssertEqual(e.context.lineNumber, error.line, source.debugDescription)
                    }
                    refused += 1
                    continue
                }
                let oracle = try OracleMessageTemplate(source, markup: markup)
                for event in Self.events {
                    let a = ours.render(event)
                    let b = oracle.render(event)
                    XCTAssertEqual(a, b, "template \(source.debugDescription), \(markup), event \(event.key)")
                    compared += 1
                }
            }
        }
        XCTAssertGreaterThan(compared, 1000)
        XCTAssertEqual(refused, (Self.broken.count + 1) * Markup.allCases.count)
    }

    func testDeepNestingRendersAsSwiftMustacheDoes() throws {
        let open = String(repeating: "{{#a}}", count: 100)
        let close = String(repeating: "{{/a}}", count: 100)
        let event = Event(source: "s", provider: "p", kind: "k", event: .new, key: "deep", title: "t", observedAt: Date(timeIntervalSince1970: 0),
                          data: ["deep": Self.deep])
        for source in ["{{#data.deep}}\(open)[{{.}}]\(close){{/data.deep}}", "{{#data.deep}}\(open)\(close){{title}}{{/data.deep}}"] {
            let a = try MessageTemplate(source, markup: .html).render(event)
            let b = try OracleMessageTemplate(source, markup: .html).render(event)
            XCTAssertEqual(a, b)
        }
    }

    // MARK: - The status page

    /// A context that has every name the status page's templates use: sections as two rows
    /// (which again have every name), values as text that needs escaping.
    func testStatusPageTemplatesRenderAsSwiftMustacheDoes() throws {
        var names = Set<String>()
        var sections = Set<String>()
        for text in StatusPageTemplates.all.values {
            var rest = Substring(text)
            while let open = rest.firstRange(of: "{{") {
                rest = rest[open.upperBound...]
                guard let close = rest.firstRange(of: "}}") else { break }
                var tag = rest[..<close.lowerBound]
                rest = rest[close.upperBound...]
                let sigil = tag.first
                if sigil == "#" || sigil == "^" || sigil == "/" || sigil == "{" || sigil == "&" { tag = tag.dropFirst() }
                let name = String(tag.filter { $0 != " " && $0 != "}" })
                if sigil == ">" || sigil == "!" || name == "." || name.isEmpty { continue }
                names.insert(name)
                if sigil == "#" || sigil == "^" { sections.insert(name) }
            }
        }
        XCTAssertGreaterThan(names.count, 30)
        func row(_ n: Int, depth: Int) -> [String: Any] {
            var r: [String: Any] = [:]
            for name in names { r[name] = "<\(name) \(n)> & \"q\" 'a' é" }
            if depth > 0 { for name in sections { r[name] = [row(n * 10 + 1, depth: depth - 1), row(n * 10 + 2, depth: depth - 1)] } }
            return r
        }
        var library = MustacheLibrary()
        for (name, text) in StatusPageTemplates.all { library.register(try MustacheTemplate(string: text), named: name) }
        let contexts: [[String: Any]] = [
            row(1, depth: 2),
            row(2, depth: 0),
            ["title": "Empty", "events": [] as [Any], "notices": [] as [Any], "healthy": false, "url": false, "comment": ""],
            ["title": "Bools", "healthy": true, "hasPolls": true, "polls": [["outcome": "ok", "at": "now"]], "count": 0, "url": "https://x/?a=1&b=2"],
        ]
        for (name, _) in StatusPageTemplates.all {
            for ctx in contexts {
                let ours = StatusPageTemplates.library.render(templateValue(ctx), withTemplate: name)
                let oracle = library.render(ctx, withTemplate: name)
                XCTAssertNotNil(ours)
                XCTAssertEqual(ours, oracle, "status page template \(name)")
            }
        }
    }
}

// MARK: - The oracle: MessageTemplate as it was on swift-mustache

private struct OracleContentType: MustacheContentType {
    var markup: Markup
    func escapeText(_ text: String) -> String { markup.escape(text) }
}

private let oracleRegistered: Void = {
    for m in Markup.allCases { MustacheContentTypes.register(OracleContentType(markup: m), named: m.rawValue) }
}()

private struct OracleMessageTemplate {
    let template: MustacheTemplate
    let source: String

    init(_ source: String, markup: Markup) throws {
        _ = oracleRegistered
        self.source = source
        template = try MustacheTemplate(string: "{{% CONTENT_TYPE: \(markup.rawValue)}}" + source)
    }

    func render(_ event: Event) -> String {
        let budget = RenderBudget(bytes: MessageTemplate.maxRenderedBytes, perRepetition: max(source.utf8.count, 16))
        return template.render(TemplateObject(event.jsonObject.objectValue ?? [:], budget)).cut(utf8Bytes: MessageTemplate.maxRenderedBytes)
    }
}

// The budget is TidingsTemplates' own (the same rules the old MessageTemplate had).
private typealias RenderBudget = TemplateBudget

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
