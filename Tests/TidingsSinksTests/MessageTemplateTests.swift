import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite
@testable import TidingsSinks

final class MessageTemplateTests: XCTestCase {
    private func sample(
        title: String = "Disk <full> & \"hot\"", body: String = "", url: String? = "https://h/1",
        data: JSONValue = .object([:])
    ) -> Event {
        Event(
            id: "01E", source: "srv", provider: "exec", kind: "alert", event: .changed, key: "k1", title: title, body: body,
            url: url, severity: .critical, observedAt: Date(timeIntervalSince1970: 1_790_000_000), data: data)
    }

    private func render(_ source: String, _ markup: Markup = .plain, _ e: Event? = nil) throws -> String {
        try MessageTemplate(source, markup: markup).render(e ?? sample())
    }

    func testEveryEventFieldIsInTheContext() throws {
        let e = sample()
        XCTAssertEqual(
            try render("{{id}}|{{source}}|{{provider}}|{{kind}}|{{event}}|{{key}}|{{severity}}|{{observed_at}}|{{url}}"),
            "01E|srv|exec|alert|changed|k1|critical|\(Timestamp.format(e.observedAt))|https://h/1")
    }

    func testEscapingPerMarkup() throws {
        let t = "{{title}}"
        XCTAssertEqual(try render(t, .plain), #"Disk <full> & "hot""#)
        XCTAssertEqual(try render(t, .html), "Disk &lt;full&gt; &amp; &quot;hot&quot;")
        XCTAssertEqual(try render(t, .notification), #"Disk &lt;full&gt; &amp; "hot""#)
        XCTAssertEqual(try render(t, .slack), #"Disk &lt;full&gt; &amp; "hot""#)
        XCTAssertEqual(Markup.slack.escape("@channel <!here>"), "@\u{2060}channel &lt;!here&gt;")
        XCTAssertEqual(try render(t, .json), #"Disk <full> & \"hot\""#)
        XCTAssertEqual(try render("{{title}}", .markdown, sample(title: "*a* [l](u) @here")), #"\*a\* \[l\]\(u\) \@here"#)
        // Triple braces insert the text as it is, whatever the markup.
        XCTAssertEqual(try render("{{{title}}}", .html), #"Disk <full> & "hot""#)
        // The desktop style's escaping is the notification markup's (one escaping, not two).
        XCTAssertEqual(DesktopStyle.escape("<b>&</b>"), Markup.notification.escape("<b>&</b>"))
    }

    func testJSONMarkupAlwaysMakesValidJSONStrings() throws {
        let nasty = "q\" b\\ nl\n cr\r tab\t nul\u{0} esc\u{1B} ä 😀 \u{2028}"
        let t = try MessageTemplate(#"{"text": "{{title}}", "body": "{{body}}"}"#, markup: .json)
        let out = t.render(sample(title: nasty, body: nasty))
        let parsed = try JSONValue.parse(Data(out.utf8))
        XCTAssertEqual(parsed["text"]?.stringValue, nasty)
        XCTAssertEqual(parsed["body"]?.stringValue, nasty)
        XCTAssertNil(t.jsonProblem())
        XCTAssertNotNil(try MessageTemplate(#"{"text": "{{{title}}}"}"#, markup: .json).jsonProblem(), "raw quotes from the sample title break it")
        XCTAssertNotNil(try MessageTemplate("not json", markup: .json).jsonProblem())
    }

    func testMarkupForContentType() {
        XCTAssertEqual(Markup.forContentType("application/json"), .json)
        XCTAssertEqual(Markup.forContentType("Application/JSON; charset=utf-8"), .json)
        XCTAssertEqual(Markup.forContentType("application/cloudevents+json"), .json)
        XCTAssertEqual(Markup.forContentType("text/html"), .html)
        XCTAssertEqual(Markup.forContentType("text/plain"), .plain)
    }

    func testMissingAndNullFieldsRenderEmpty() throws {
        XCTAssertEqual(try render("[{{nothing}}][{{data.none.deeper}}][{{title.x}}][{{url}}]", .plain, sample(url: nil)), "[][][][]")
        XCTAssertEqual(try render("{{#url}}<{{url}}>{{/url}}{{^url}}no link{{/url}}", .plain, sample(url: nil)), "no link")
        XCTAssertEqual(try render("{{#url}}<{{url}}>{{/url}}{{^url}}no link{{/url}}"), "<https://h/1>")
        // A member that is null stops the lookup: it does not find the event's own `url`.
        let e = sample(data: ["url": .null])
        XCTAssertEqual(try render("{{#data}}[{{url}}]{{/data}}", .plain, e), "[]")
        // An empty string is false in a section, so optional parts can be left out.
        XCTAssertEqual(try render("{{title}}{{#body}}: {{body}}{{/body}}", .plain, sample(title: "T")), "T")
    }

    func testDataValues() throws {
        let e = sample(data: [
            "n": 3, "big": 1e20, "half": 0.5, "yes": true, "no": false, "s": "x",
            "a": ["x": ["y": "deep"]], "list": [["name": "a"], ["name": "b"]], "empty": [],
        ])
        XCTAssertEqual(
            try render("{{data.n}} {{data.big}} {{data.half}} {{data.yes}} {{data.no}} {{data.s}}", .plain, e),
            "3 1e+20 0.5 true false x")
        XCTAssertEqual(try render("{{data.a.x.y}}", .plain, e), "deep")
        XCTAssertEqual(try render("{{#data.list}}{{name}},{{/data.list}}", .plain, e), "a,b,")
        XCTAssertEqual(try render("{{#data.yes}}Y{{/data.yes}}{{#data.no}}N{{/data.no}}{{^data.no}}not{{/data.no}}", .plain, e), "Ynot")
        XCTAssertEqual(try render("{{^data.empty}}none{{/data.empty}}{{#data.empty}}x{{/data.empty}}", .plain, e), "none")
        // Containers render as compact JSON, escaped like anything else unless in triple braces.
        XCTAssertEqual(
            try render("{{{data.a}}} {{data.list}}", .html, e), #"{"x":{"y":"deep"}} [{&quot;name&quot;:&quot;a&quot;},{&quot;name&quot;:&quot;b&quot;}]"#)
        // Mustache's transforms, on strings, numbers, arrays and objects.
        XCTAssertEqual(
            try render("{{uppercased(data.s)}} {{plusone(data.n)}} {{count(data.list)}} {{#first(data.list)}}{{name}}{{/first(data.list)}}", .plain, e),
            "X 4 2 a")
        XCTAssertEqual(try render("{{#sorted(data.a)}}{{key}}={{{value}}}{{/sorted(data.a)}}", .plain, e), #"x={"y":"deep"}"#)
    }

    func testPartialsAndInheritanceRenderEmpty() throws {
        XCTAssertEqual(try render("a{{> other}}b{{>*title}}c"), "abc")
        XCTAssertEqual(try render("a{{<parent}}{{$x}}y{{/x}}{{/parent}}b"), "ab")
        XCTAssertEqual(try render("a{{$block}}default{{/block}}b"), "adefaultb")
        XCTAssertEqual(try render("{{! a comment }}{{=<% %>=}}<% title %>", .plain, sample(title: "T")), "T")
    }

    func testSyntaxErrorsSayWhere() {
        func error(_ source: String) -> MessageTemplate.SyntaxError? {
            do { _ = try MessageTemplate(source, markup: .html) } catch { return error }
            return nil
        }
        XCTAssertEqual(error("{{#a}}x")?.line, 1)
        XCTAssertEqual(error("line1\nline2 {{#a}}\n{{/b}}")?.line, 3)
        XCTAssertEqual(error("line1\nline2 {{#a}}\n{{/b}}")?.reason, "a closing tag {{/…}} does not match the section it closes")
        XCTAssertEqual(error("ab {{title")?.line, 1)
        XCTAssertEqual(error("{{% NOPE }}")?.reason, "unknown pragma {{%…}}")
        XCTAssertNotNil(error("{{=x=}}"))
        // The column is the user's, not shifted by the markup pragma in front.
        let e = error("abc {{/x}}")
        XCTAssertEqual(e?.line, 1)
        XCTAssertLessThanOrEqual(e?.column ?? 99, 11)
        XCTAssertNil(error("{{title}} {{#data.list}}{{.}}{{/data.list}}"))
    }

    func testHostileDataStaysBounded() throws {
        // Nested deeper than the JSON writer and parser allow (no event gets there: the intake
        // cuts `data` at 64 levels, the parser refuses more than 512; a JSONValue 100k deep
        // cannot even be freed on a thread's stack). The template walks only what it names.
        var deep: JSONValue = "bottom"
        for _ in 0..<600 { deep = ["d": deep] }
        var e = sample(data: ["deep": deep])
        XCTAssertEqual(try render("[{{data.deep.d.d.x}}]{{#data.deep}}ok{{/data.deep}}", .plain, e), "[]ok")
        XCTAssertTrue(try render("{{{data.deep}}}", .plain, e).contains("nested deeper than"))
        // Huge strings and repeated sections: cut at the cap, quickly.
        let huge = String(repeating: "x", count: 200_000)
        let list = JSONValue.array(Array(repeating: .string(huge), count: 2_000))
        e = sample(title: huge, data: ["list": list])
        let started = Date()
        let out = try render("{{#data.list}}{{#data.list}}{{#data.list}}{{.}}{{title}}{{/data.list}}{{/data.list}}{{/data.list}}", .html, e)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        XCTAssertLessThanOrEqual(out.utf8.count, MessageTemplate.maxRenderedBytes)
        XCTAssertTrue(out.hasSuffix("…"))
        // Many repetitions with little text each are bounded too.
        let many = JSONValue.array(Array(repeating: 1, count: 3_000))
        let small = try render("{{#data.m}}{{#data.m}}{{#data.m}}ab{{/data.m}}{{/data.m}}{{/data.m}}", .plain, sample(data: ["m": many]))
        XCTAssertLessThanOrEqual(small.utf8.count, MessageTemplate.maxRenderedBytes)
    }

    func testCutKeepsCharactersWhole() {
        XCTAssertEqual("abc".cut(utf8Bytes: 3), "abc")
        XCTAssertEqual("ääää".cut(utf8Bytes: 6), "ä…")
        XCTAssertEqual(String(repeating: "😀", count: 10).cut(utf8Bytes: 10), "😀…")
    }

    // MARK: config

    func testBadTemplatesAreConfigErrorsAtTheirLines() throws {
        let errors = try configErrors(
            #"""
            [sinks.a]
            type = "stdout"
            title_template = "{{#oops}}"

            [sinks.b]
            type = "webhook"
            url = "https://hooks.example/x"
            body_template = """
            {
              "text": "{{title}}",
              "more": "{{/data}}"
            }
            """

            [sinks.c]
            type = "desktop"
            title_template = '''{{/x}}'''
            body_template = "{{x"
            """#)
        let lines = errors.map { "\($0.line ?? 0): \($0.message)" }
        XCTAssertEqual(errors.count, 4, "\(lines)")
        XCTAssertTrue(
            lines.contains { $0.hasPrefix("3: sink \"a\": 'title_template' is not a valid Mustache template: a section is never closed") }, "\(lines)")
        // The failing line of the multi-line template: the template's line 3 is the file's line 11.
        XCTAssertTrue(lines.contains { $0.hasPrefix("11: sink \"b\": 'body_template'") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("17: sink \"c\": 'title_template'") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("18: sink \"c\": 'body_template'") }, "\(lines)")
    }

    func testTemplateLineMapsOnlyWhenTheFileHoldsItVerbatim() throws {
        // An escape on the way makes the file's lines differ from the template's: the option's line.
        let errors = try configErrors(
            #"""
            [sinks.a]
            type = "stdout"
            body_template = """
            a \"quoted\" line
            {{/x}}
            """
            """#)
        XCTAssertEqual(errors.map(\.line), [3])
    }

    func testWebhookTemplateOptions() throws {
        XCTAssertEqual(
            try configErrors(
                """
                [sinks.h]
                type = "webhook"
                url = "https://hooks.example/x"
                batch = true
                body_template = "{}"
                """
            ).map(\.message), [#"sink "h": 'body_template' renders one event per request: it does not go with 'batch = true'"#])
        XCTAssertEqual(
            try configErrors(
                """
                [sinks.h]
                type = "webhook"
                url = "https://hooks.example/x"
                content_type = "text/plain"
                """
            ).count, 1)
        let config = try loadConfig(
            #"""
            [sinks.h]
            type = "webhook"
            url = "https://hooks.example/x"
            body_template = 'text={{{title}}}'
            content_type = "text/plain; charset=utf-8"

            [sinks.j]
            type = "webhook"
            url = "https://hooks.example/y"
            body_template = '{"text": "{{title}}"'
            """#)
        let sink = try XCTUnwrap(config.sink(named: "h")?.instance as? WebhookSink)
        let e = sample()
        let r = sink.request(id: e.id, body: sink.body(for: e))
        XCTAssertEqual(r.headers.first { $0.0 == "Content-Type" }?.1, "text/plain; charset=utf-8")
        XCTAssertEqual(String(decoding: r.body ?? Data(), as: UTF8.self), #"text=Disk <full> & "hot""#)
        // The JSON one does not render JSON for a sample event: a warning at its line, not an error.
        let warnings = config.warnings.filter { $0.contains("body_template") }
        XCTAssertEqual(warnings.count, 1, "\(config.warnings)")
        XCTAssertTrue(warnings.first?.contains("tidings.toml:10: sink \"j\": 'body_template' is sent as application/json") == true, "\(config.warnings)")
    }

    func testStdoutTemplates() throws {
        let config = try loadConfig(
            """
            [sinks.s]
            type = "stdout"
            title_template = "[{{source}}] {{title}}"
            body_template = "{{data.n}} items"
            """)
        let sink = try XCTUnwrap(config.sink(named: "s")?.instance as? StdoutSink)
        let shown = sink.shown(sample(data: ["n": 2]))
        XCTAssertEqual(shown.title, #"[srv] Disk <full> & "hot""#)
        XCTAssertEqual(shown.body, "2 items")
        // Defaults reproduce the event's own title and body.
        let plain = StdoutSink(format: .text, color: false)
        XCTAssertEqual(plain.shown(sample(body: "b")), sample(body: "b"))
        XCTAssertEqual(
            try configErrors(
                """
                [sinks.s]
                type = "stdout"
                format = "json"
                title_template = "x"
                """
            ).count, 1)
    }

    func testDesktopTemplatesEscapeOnce() {
        var style = DesktopStyle()
        style.titleTemplate = MessageTemplate.builtin("{{severity}}: {{title}}", markup: .plain)
        style.bodyTemplate = MessageTemplate.builtin("<b>{{body}}</b>", markup: .notification)
        let e = sample(title: "a<b>", body: "x & y")
        var n = style.single(e)
        XCTAssertEqual(n.summary, "critical: a<b>")
        XCTAssertEqual(n.body, "<b>x &amp; y</b>")
        style.bodyMarkup = false
        n = style.single(e)
        XCTAssertEqual(n.body, "<b>x & y</b>")
        // Defaults are today's output.
        let d = DesktopStyle().single(e)
        XCTAssertEqual(d.summary, "a<b>")
        XCTAssertEqual(d.body, "x &amp; y")
    }
}
