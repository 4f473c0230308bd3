import Foundation
import Logging
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

/// `provider = "page"` (DESIGN §12): the CSS selector engine, rendered text, the line diff and
/// what a page becomes as items.
final class PageProviderTests: XCTestCase {
    let pageURL = URL(string: "https://example.org/jobs")!

    // MARK: CSS selectors

    static let list = """
        <html><body>
          <div id="main" class="box wide">
            <ul class="jobs">
              <li id="j1" class="job" data-id="1" lang="en-GB">One</li>
              <li id="j2" class="job hot" data-id="2" title="senior dev">Two</li>
              <li id="j3" class="job" data-id="3" title='x"y'>Three</li>
              <li id="j4" class="job closed">Four</li>
              <li id="j5">Five</li>
            </ul>
            <p id="p1">Intro <span id="s1" class="hot">hot</span></p>
          </div>
          <span id="s2">outside</span>
        </body></html>
        """

    /// The ids of the elements `selector` selects in `html`, in order.
    func ids(_ selector: String, in html: String = PageProviderTests.list) throws -> [String] {
        let doc = try PageDocument(Data(html.utf8), charset: "utf-8")
        return try CSSSelector(selector).select(under: doc.root, cut: &cut).map { HTMLTree.attribute($0, "id") ?? HTMLTree.name($0) }
    }

    var cut = false

    func testTypeUniversalClassAndId() throws {
        XCTAssertEqual(try ids("li"), ["j1", "j2", "j3", "j4", "j5"])
        XCTAssertEqual(try ids("LI"), ["j1", "j2", "j3", "j4", "j5"], "type selectors ignore case in HTML")
        XCTAssertEqual(try ids(".hot"), ["j2", "s1"])
        XCTAssertEqual(try ids("li.job.hot"), ["j2"])
        XCTAssertEqual(try ids("#j3"), ["j3"])
        XCTAssertEqual(try ids("ul > *").count, 5)
        XCTAssertEqual(try ids("div.box.wide#main"), ["main"])
        XCTAssertEqual(try ids(".nothing"), [])
    }

    func testAttributeForms() throws {
        XCTAssertEqual(try ids("[title]"), ["j2", "j3"])
        XCTAssertEqual(try ids("[data-id=2]"), ["j2"])
        XCTAssertEqual(try ids("[data-id=\"3\"]"), ["j3"])
        XCTAssertEqual(try ids("[title='x\"y']"), ["j3"], "a quote inside the other quotes")
        XCTAssertEqual(try ids("[class~=hot]"), ["j2", "s1"])
        XCTAssertEqual(try ids("[class~=ho]"), [], "~= matches whole words")
        XCTAssertEqual(try ids("[title^=sen]"), ["j2"])
        XCTAssertEqual(try ids("[title$=dev]"), ["j2"])
        XCTAssertEqual(try ids("[title*='ior d']"), ["j2"])
        XCTAssertEqual(try ids("[lang^=en]"), ["j1"])
        XCTAssertEqual(try ids("[title^='']"), [], "an empty value matches nothing with ^=")
        XCTAssertEqual(try ids("li[ data-id = 1 ]"), ["j1"])
    }

    func testDescendantAndChildCombinators() throws {
        XCTAssertEqual(try ids("div span"), ["s1"])
        XCTAssertEqual(try ids("body span"), ["s1", "s2"])
        XCTAssertEqual(try ids("body > span"), ["s2"])
        XCTAssertEqual(try ids("div > span"), [], "the span is a grandchild")
        XCTAssertEqual(try ids("div>p>span"), ["s1"])
        XCTAssertEqual(try ids("#main ul li.hot"), ["j2"])
        XCTAssertEqual(try ids("html body div ul > li#j4"), ["j4"])
    }

    func testNthChildFirstLastAndNot() throws {
        XCTAssertEqual(try ids("li:nth-child(2)"), ["j2"])
        XCTAssertEqual(try ids("li:nth-child(odd)"), ["j1", "j3", "j5"])
        XCTAssertEqual(try ids("li:nth-child(even)"), ["j2", "j4"])
        XCTAssertEqual(try ids("li:nth-child(2n+1)"), ["j1", "j3", "j5"])
        XCTAssertEqual(try ids("li:nth-child(3n)"), ["j3"])
        XCTAssertEqual(try ids("li:nth-child(-n+2)"), ["j1", "j2"])
        XCTAssertEqual(try ids("li:nth-child(n+4)"), ["j4", "j5"])
        XCTAssertEqual(try ids("li:nth-child( 2n - 1 )"), ["j1", "j3", "j5"])
        XCTAssertEqual(try ids("li:first-child"), ["j1"])
        XCTAssertEqual(try ids("li:last-child"), ["j5"])
        XCTAssertEqual(try ids("li:not(.closed)"), ["j1", "j2", "j3", "j5"])
        XCTAssertEqual(try ids("li.job:not([data-id])"), ["j4"])
        XCTAssertEqual(try ids("li:not(:first-child):not(:last-child)"), ["j2", "j3", "j4"])
    }

    func testSelectorListsAreInDocumentOrderWithoutRepeats() throws {
        XCTAssertEqual(try ids("#s2, #j1, li:first-child, p"), ["j1", "p1", "s2"])
    }

    func testBadSelectorsSayWhere() {
        func problem(_ s: String) -> String {
            do {
                _ = try CSSSelector(s)
                return "parsed"
            } catch {
                return error.description
            }
        }
        XCTAssertEqual(problem(""), "at character 1: empty selector")
        XCTAssertEqual(problem("li["), "at character 4: an attribute name is missing after '['")
        XCTAssertEqual(problem("li[a=1"), "at character 7: '[' at character 3 is not closed")
        XCTAssertEqual(problem("a,"), "at character 3: a selector is missing after ','")
        XCTAssertEqual(problem("a > "), "at character 5: a selector is missing after '>'")
        XCTAssertEqual(problem("li:hover"), "at character 3: the pseudo-class ':hover' is not supported (only :nth-child, :first-child, :last-child, :not)")
        XCTAssertEqual(problem("li:nth-child(x)"), "at character 14: ':nth-child(x)': expected An+B, odd or even")
        XCTAssertEqual(problem("a + b"), "at character 3: the combinator '+' is not supported (only descendant ' ' and child '>')")
        XCTAssertEqual(problem("li:not(a b)"), "at character 10: ':not' takes one compound selector (no combinators or lists), found 'b'")
        XCTAssertEqual(problem("a[title='x]"), "at character 12: the quote at character 9 is not closed")
        XCTAssertEqual(problem("#"), "at character 2: a name is missing after '#'")
        XCTAssertEqual(problem("a!"), "at character 2: unexpected '!'")
    }

    func testBadXPathSaysWhere() {
        XCTAssertNil(PageXPath.check("//li[@class='job']/text()"))
        XCTAssertNotNil(PageXPath.check("//li[@class='job'"))
        XCTAssertTrue(PageXPath.check("//li[")?.contains("at character") ?? false, PageXPath.check("//li[") ?? "")
        XCTAssertNotNil(PageXPath.check(""))
    }

    // MARK: rendered text

    func lines(_ html: String, select: String? = nil, charset: String? = "utf-8") throws -> [String] {
        let doc = try PageDocument(Data(html.utf8), charset: charset)
        var r = RenderedText()
        if let select {
            for n in try CSSSelector(select).select(under: doc.root, cut: &cut) { r.render(n) }
        } else {
            r.render(doc.root)
        }
        return r.lines
    }

    func testRenderedTextBlocksWhitespaceEntitiesAndDroppedElements() throws {
        let html = """
            <html><head><title>T</title><style>p { color: red }</style><script>var x = "<p>no</p>";</script></head>
            <body>
              <h1>Jobs&nbsp;&amp;&nbsp;more</h1>
              <p>First   line
                 continues <b>bold</b> <i>it</i>al</p>
              <div>A<br>B</div>
              <noscript>enable JS</noscript><template><p>tpl</p></template>
              <!-- a comment -->
              <table><tr><td>cell 1</td><td>cell 2</td></tr><tr><td>cell 3</td></tr></table>
              <ul><li>one</li><li>two</li></ul>
              <pre>keep   this
            line</pre>
            </body></html>
            """
        XCTAssertEqual(
            try lines(html),
            [
                "Jobs & more", "First line continues bold ital", "A", "B", "cell 1 cell 2", "cell 3", "one", "two",
                "keep this", "line",
            ])
    }

    func testBrokenNestingIsRepairedAsABrowserWould() throws {
        let html = "<body><p>one<p>two<div>three</span></div><td>cell</td><li>item<b>bold<i>both</b>it</i></body>"
        let got = try lines(html)
        XCTAssertEqual(Array(got.prefix(3)), ["one", "two", "three"])
        XCTAssertTrue(got.contains("cell"), "\(got)")
        XCTAssertEqual(try lines(html, select: "p").first, "one", "an unclosed <p> ends at the next <p>")
    }

    func testTerminalEscapesAndMarkupInTextArePlainText() throws {
        let html = "<p>red \u{1B}[31mALERT\u{1B}[0m &#27;]0;title&#7; &lt;script&gt;alert(1)&lt;/script&gt; \u{202E}evil</p>"
        let got = try lines(html)
        XCTAssertEqual(got, ["red [31mALERT[0m ]0;title <script>alert(1)</script> evil"])
        XCTAssertFalse(got.joined().unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E })
    }

    func testCharsetHeaderThenMetaThenUTF8() throws {
        func text(_ bytes: [UInt8], _ charset: String?) throws -> [String] {
            let doc = try PageDocument(Data(bytes), charset: charset)
            var r = RenderedText()
            withExtendedLifetime(doc) { r.render(doc.root) }
            return r.lines
        }
        // "Café €" in windows-1252, declared by the header only.
        let cp1252: [UInt8] = Array("<p>Caf".utf8) + [0xE9, 0x20, 0x80] + Array("</p>".utf8)
        XCTAssertEqual(try text(cp1252, "windows-1252"), ["Café €"])
        // ISO-8859-1 as a label means windows-1252 (0x80 is €), as in browsers.
        XCTAssertEqual(try text(cp1252, "ISO-8859-1"), ["Café €"])
        // The page's meta when the header says nothing.
        let meta: [UInt8] = Array("<html><head><meta charset=\"windows-1252\"></head><body><p>Caf".utf8) + [0xE9] + Array("</p></body></html>".utf8)
        XCTAssertEqual(try text(meta, nil), ["Café"])
        // The header wins over a meta that disagrees: UTF-8 bytes, meta says windows-1252.
        let utf8 = Array(
            "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"></head><body><p>Café</p></body></html>".utf8)
        XCTAssertEqual(try text(utf8, "utf-8"), ["Café"])
        XCTAssertEqual(PageDocument.metaCharset(Data(utf8)), "windows-1252")
        XCTAssertEqual(try text(utf8, nil), ["CafÃ©"], "without the header the meta counts, even when it is wrong")
    }

    func testDeepNestingIsAClearFailureAndShallowerIsRead() throws {
        func page(_ depth: Int) -> Data {
            Data(
                ("<html><body>" + String(repeating: "<div>", count: depth) + "deep" + String(repeating: "</div>", count: depth)
                    + "<p>after</p></body></html>").utf8)
        }
        let start = Date()
        XCTAssertThrowsError(try provider().decode(page(100_000), contentType: "text/html")) { error in
            XCTAssertTrue("\(error)".contains("more than 256 levels deep"), "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 30)
        let items = try provider(select: "div div > div, p", each: true).decode(page(200), contentType: "text/html").items
        XCTAssertEqual(items.map(\.title), ["deep", "after"], "nested divs with the same text are one item")
    }

    // MARK: diff

    func testUnifiedDiffWithContextThree() {
        let a = (1...12).map { "line \($0)" }
        var b = a
        b[1] = "line 2 edited"
        b.insert("inserted", at: 10)
        let diff = TextDiff.lines(a, b)
        XCTAssertTrue(diff.minimal)
        XCTAssertEqual(
            TextDiff.unified(diff.ops),
            """
            --- before
            +++ after
            @@ -1,5 +1,5 @@
             line 1
            -line 2
            +line 2 edited
             line 3
             line 4
             line 5
            @@ -8,5 +8,6 @@
             line 8
             line 9
             line 10
            +inserted
             line 11
             line 12
            """)
        XCTAssertEqual(TextDiff.unified(TextDiff.lines(a, a).ops), "")
        XCTAssertEqual(TextDiff.unified(TextDiff.lines([], ["x"]).ops), "--- before\n+++ after\n@@ -0,0 +1,1 @@\n+x")
    }

    func testDiffIsShortestAndNearChangesShareAHunk() {
        let diff = TextDiff.lines(["a", "b", "c", "a", "b", "b", "a"], ["c", "b", "a", "b", "a", "c"])
        XCTAssertEqual(diff.ops.filter { if case .same = $0 { return false } else { return true } }.count, 5, "Myers' example: D = 5")
        let a = (1...8).map(String.init)
        var b = a
        b[0] = "x"
        b[6] = "y"
        XCTAssertEqual(TextDiff.unified(TextDiff.lines(a, b).ops).components(separatedBy: "@@ ").count - 1, 1)
    }

    func testAHugeDiffIsBoundedAndCut() {
        let a = (0..<50_000).map { "old \($0)" }
        let b = (0..<50_000).map { "new \($0)" }
        let start = Date()
        let diff = TextDiff.lines(["same"] + a + ["end"], ["same"] + b + ["end"])
        XCTAssertFalse(diff.minimal)
        XCTAssertEqual(diff.ops.count, 100_002)
        let text = TextDiff.unified(diff.ops)
        XCTAssertLessThanOrEqual(text.utf8.count, 8100)
        XCTAssertTrue(text.hasSuffix("more lines)"), String(text.suffix(80)))
        XCTAssertLessThan(Date().timeIntervalSince(start), 30)
    }

    // MARK: items and events

    func provider(select: String? = nil, each: Bool = false, key: PageProvider.Key? = nil, ignore: [String] = []) throws -> PageProvider {
        var selection = PageProvider.Selection.document
        if let select { selection = select.hasPrefix("xpath:") ? .xpath(String(select.dropFirst(6))) : .css(try CSSSelector(select)) }
        return PageProvider(url: pageURL, selection: selection, each: each, key: key, ignore: try ignore.map { try SafeRegex($0) })
    }

    func testEachWithKeysTextDigestsAndIgnore() throws {
        let html = """
            <ul><li data-id="a">Alpha <small>Updated 12:00:01</small></li><li data-id="b">Beta</li><li>Gamma</li><li>Gamma</li></ul>
            <p>Generated at 12:00:01</p>
            """
        let keyed = try provider(select: "li", each: true, key: .attribute("data-id")).decode(Data(html.utf8), contentType: "text/html")
        XCTAssertEqual(keyed.items.map(\.key).prefix(2), ["a", "b"])
        XCTAssertEqual(keyed.items.count, 3, "the two Gamma elements without a key are one item")
        XCTAssertEqual(keyed.items[0].kind, "page")
        XCTAssertEqual(keyed.items[0].title, "Alpha Updated 12:00:01")
        XCTAssertEqual(keyed.items[0].url, "https://example.org/jobs")
        let byText = try provider(select: "li", each: true).decode(Data(html.utf8), contentType: "text/html").items
        XCTAssertEqual(byText.count, 3)
        XCTAssertTrue(byText.allSatisfy { $0.key.hasPrefix("text:") })
        let xpathKey = try provider(select: "xpath://li", each: true, key: .xpath("@data-id")).decode(Data(html.utf8), contentType: "text/html")
        XCTAssertEqual(xpathKey.items.map(\.key).prefix(2), ["a", "b"])

        let whole = try provider(ignore: ["^Generated at "]).decode(Data(html.utf8), contentType: "text/html; charset=utf-8").items
        XCTAssertEqual(whole.count, 1)
        XCTAssertEqual(whole[0].key, "page")
        XCTAssertEqual(whole[0].data["text"]?.stringValue, "Alpha Updated 12:00:01\nBeta\nGamma\nGamma")
        let later = html.replacingOccurrences(of: "Generated at 12:00:01", with: "Generated at 12:05:09")
        XCTAssertEqual(
            try provider(ignore: ["^Generated at "]).decode(Data(later.utf8), contentType: "text/html").items[0].fingerprint,
            whole[0].fingerprint, "an ignored line changes nothing")
    }

    func testEachTakesAtMostTenThousandElementsAndSaysSo() throws {
        let html = "<ul>" + (0...PageProvider.maxItems).map { "<li>\($0)</li>" }.joined() + "</ul>"
        let decoded = try provider(select: "li", each: true).decode(Data(html.utf8), contentType: "text/html")
        XCTAssertEqual(decoded.items.count, PageProvider.maxItems)
        XCTAssertEqual(decoded.notes, ["'select' matched 10001 elements: only the first 10000 are read"])
    }

    /// Issue 30 item 12: each selected element rendered up to 1 MiB on its own, so nested
    /// selections rendered the text under them once per selected ancestor. Rendering is budgeted
    /// per page (8 × its size, within max_body, at least 1 MiB): past it, a poll error.
    func testNestedSelectionsAreBudgetedPerPage() throws {
        let text = (0..<1_000).map { "<p>paragraph \($0) lorem ipsum dolor sit amet</p>" }.joined()
        func page(nesting: Int) -> Data {
            Data(("<html><body>" + (0..<nesting).map { #"<div class="job"><h2>level \#($0)</h2>"# }.joined() + text
                + String(repeating: "</div>", count: nesting) + "</body></html>").utf8)
        }
        let nested = page(nesting: 100)
        XCTAssertThrowsError(try provider(select: "div.job", each: true).decode(nested, contentType: "text/html")) { error in
            XCTAssertEqual(
                (error as? PollError)?.message,
                "the selected elements' text is more than \(1 << 20) bytes in all (tidings renders at most 8 × the page's size, within max_body): nested selections? not read")
        }
        let few = try provider(select: "div.job", each: true).decode(page(nesting: 3), contentType: "text/html")
        XCTAssertEqual(few.items.count, 3, "a few nested selections are read")
        // The budget is the page's: 8 × its size when that is over 1 MiB, never over max_body.
        XCTAssertEqual(DocumentBudget.page(pageSize: 1 << 20, maxBody: 10 << 20).maxBytes, 8 << 20)
        XCTAssertEqual(DocumentBudget.page(pageSize: 4 << 20, maxBody: 10 << 20).maxBytes, 10 << 20)
        XCTAssertEqual(DocumentBudget.page(pageSize: 1000, maxBody: 10 << 20).maxBytes, 1 << 20)
    }

    /// Issue 30 item 13: the poll's timeout stops an XPath evaluation within an operation (libxml2
    /// counts `string(/)` as one, whatever the page), and its operations count per page.
    func testXPathStopsWhenThePollsWorkIsStopped() throws {
        let doc = try PageDocument(Data(("<html><body>" + String(repeating: "<b>x</b>", count: 20_000) + "</body></html>").utf8), charset: nil)
        let stop = WorkStop()
        stop.stop()
        XCTAssertThrowsError(
            try WorkStop.$current.withValue(stop) {
                try PageXPath.evaluate("//*[contains(string(/), 'zz')]", doc: doc.doc, node: doc.root)
            }
        ) { error in
            XCTAssertEqual((error as? PollError)?.message, #"stopped evaluating XPath "//*[contains(string(/), 'zz')]": the poll ran out of time"#)
        }
        let budget = DocumentBudget.page(pageSize: 100, maxBody: 1000)
        guard case .value(let count)? = try PageXPath.evaluate("count(//b)", doc: doc.doc, node: doc.root, budget: budget).first else {
            return XCTFail("a number")
        }
        XCTAssertEqual(count, "20000")
        XCTAssertGreaterThan(budget.operations, 20_000, "each node visited counts")
        budget.add(operations: PageXPath.maxOperations)
        XCTAssertThrowsError(try PageXPath.evaluate("count(//b)", doc: doc.doc, node: doc.root, budget: budget)) { error in
            XCTAssertTrue("\(error)".contains("took more than 20000000 operations on this page"), "\(error)")
        }
        XCTAssertTrue(budget.spent, "the page is an error, also when the evaluation was a key's (whose error is not thrown)")
        XCTAssertThrowsError(try budget.check()) { error in
            XCTAssertEqual(
                (error as? PollError)?.message,
                "the XPath evaluations on this page took more than 20000000 operations in all (tidings' limit per page, keys included): not read")
        }
    }

    func testPlainTextAndTypesThatAreNotText() throws {
        let text = try provider().decode(Data("version: 1.2\n\n  status:   ok <b>\n".utf8), contentType: "text/plain").items
        XCTAssertEqual(text[0].data["text"]?.stringValue, "version: 1.2\nstatus: ok <b>", "text/plain is not parsed as HTML")
        XCTAssertThrowsError(try provider().decode(Data([0x89, 0x50]), contentType: "image/png"))
        XCTAssertThrowsError(try provider(select: "p").decode(Data("{}".utf8), contentType: "application/json"))
        XCTAssertThrowsError(
            try provider(select: "p.none").decode(Data("<p>x</p>".utf8), contentType: "text/html"),
            "each = false and nothing selected is a failed poll")
    }

    func testXPathStringsAndNumbers() throws {
        let html = "<ul><li>a</li><li>b</li></ul>"
        XCTAssertEqual(try provider(select: "xpath:count(//li)").decode(Data(html.utf8), contentType: "text/html").items[0].title, "2")
        XCTAssertEqual(try provider(select: "xpath:string(//li[2])").decode(Data(html.utf8), contentType: "text/html").items[0].title, "b")
    }

    func testChangedEventBodyIsAUnifiedDiff() throws {
        let p = try provider()
        let before = try p.decode(Data("<p>one</p><p>two</p><p>three</p>".utf8), contentType: "text/html").items[0]
        let after = try p.decode(Data("<p>one</p><p>2</p><p>three</p><p>four</p>".utf8), contentType: "text/html").items[0]
        var event = Event(
            source: "s", provider: "page", kind: "page", event: .changed, key: "page", title: after.title, body: after.body,
            url: nil, severity: .info, observedAt: Date(), data: ["text": after.data["text"]!, "changes": ["text": ["old": "x"], "title": ["old": "y"]]])
        p.describe(&event, change: Deduplicator.Change(type: .changed, item: after, previous: before), firstSeen: Date())
        XCTAssertEqual(event.body, "--- before\n+++ after\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four")
        XCTAssertEqual(event.data["added"], ["2", "four"])
        XCTAssertEqual(event.data["removed"], ["two"])
        XCTAssertNil(event.data["changes"]?["text"], "the whole text is not repeated")
        XCTAssertNotNil(event.data["changes"]?["title"])
    }
}
