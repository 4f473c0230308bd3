import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

/// `provider = "feed"` (DESIGN §12): the formats, keys, text, links and real-world breakage.
final class FeedProviderTests: XCTestCase {
    let feedURL = URL(string: "https://example.org/blog/feed.xml")!

    func provider(include: [String] = [], exclude: [String] = [], maxEntries: Int = 500) throws -> FeedProvider {
        FeedProvider(
            url: feedURL, include: try include.map { try SafeRegex($0) }, exclude: try exclude.map { try SafeRegex($0) },
            maxEntries: maxEntries)
    }

    func decode(_ text: String, charset: String? = nil) throws -> [Item] {
        try provider().decode(Data(text.utf8), charset: charset)
    }

    func decode(bytes: [UInt8], charset: String? = nil) throws -> [Item] {
        try provider().decode(Data(bytes), charset: charset)
    }

    // MARK: RSS

    func testRSS20WithGuid() throws {
        let items = try decode(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">
              <channel>
                <title>Blog</title><link>https://example.org/blog/</link>
                <item>
                  <title>Tom &amp;amp; Jerry &lt;b&gt;return&lt;/b&gt;</title>
                  <link>https://example.org/blog/2026/tom?utm_source=rss</link>
                  <guid isPermaLink="false">post-1</guid>
                  <description>&lt;p&gt;First paragraph.&lt;/p&gt;&lt;p&gt;Second   paragraph with &lt;a href="x"&gt;a link&lt;/a&gt;.&lt;/p&gt;</description>
                  <pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate>
                  <dc:creator>Ann Author</dc:creator>
                  <category>news</category><category> cartoons </category>
                  <enclosure url="/media/ep1.mp3" length="12345" type="audio/mpeg"/>
                </item>
                <item>
                  <title>Permalink guid</title>
                  <guid>https://example.org/blog/2</guid>
                  <content:encoded><![CDATA[<div>Full <em>content</em></div>]]></content:encoded>
                </item>
              </channel>
            </rss>
            """)
        XCTAssertEqual(items.count, 2)
        let a = items[0]
        XCTAssertEqual(a.key, "post-1")
        XCTAssertEqual(a.kind, "entry")
        XCTAssertEqual(a.title, "Tom & Jerry return")
        XCTAssertEqual(a.body, "First paragraph.\nSecond paragraph with a link.")
        XCTAssertEqual(a.url, "https://example.org/blog/2026/tom?utm_source=rss")
        XCTAssertEqual(a.data["published"], "2003-06-10T04:00:00Z")
        XCTAssertEqual(a.data["author"], "Ann Author")
        XCTAssertEqual(a.data["categories"], ["news", "cartoons"])
        XCTAssertEqual(a.data["enclosures"], [["url": "https://example.org/media/ep1.mp3", "type": "audio/mpeg", "length": 12345]])
        XCTAssertNil(a.data["updated"])
        let b = items[1]
        XCTAssertEqual(b.key, "https://example.org/blog/2")
        XCTAssertEqual(b.url, "https://example.org/blog/2", "a permalink guid is the link")
        XCTAssertEqual(b.body, "Full content")
    }

    func testTrackingParametersDoNotChangeAnEntrysIdentity() throws {
        func feed(_ query: String) -> String {
            """
            <rss version="0.92"><channel>
              <item><title>Linked</title><link>/blog/linked\(query)</link></item>
              <item><title>Guid</title><guid>https://example.org/p/7\(query)</guid></item>
            </channel></rss>
            """
        }
        let plain = try decode(feed(""))
        let tracked = try decode(feed("?utm_source=feedburner&amp;utm_medium=feed&amp;fbclid=x1"))
        XCTAssertEqual(tracked.map(\.key), plain.map(\.key))
        XCTAssertEqual(tracked.map(\.key), ["https://example.org/blog/linked", "https://example.org/p/7"])
        XCTAssertEqual(
            tracked[0].url, "https://example.org/blog/linked?utm_source=feedburner&utm_medium=feed&fbclid=x1",
            "the link itself is left as the publisher wrote it")
        // Other parameters are part of the identity, in their order.
        let other = try decode(feed("?id=3&amp;utm_campaign=x&amp;page=2"))
        XCTAssertEqual(other[0].key, "https://example.org/blog/linked?id=3&page=2")
        XCTAssertEqual(FeedText.identity("tag:example.org,2026:utm_source=1"), "tag:example.org,2026:utm_source=1")
    }

    func testRSSWithoutGuidIsKeyedByLinkAndWithoutLinkByDigest() throws {
        func feed(_ title: String, date: String = "Wed, 11 Jun 2003 09:30:00 +0200") -> String {
            """
            <rss version="0.92"><channel>
              <item><title>Linked</title><link>/blog/linked</link><description>x</description></item>
              <item><title>\(title)</title><description>no link, no guid</description><pubDate>\(date)</pubDate></item>
            </channel></rss>
            """
        }
        let items = try decode(feed("Bare"))
        XCTAssertEqual(items[0].key, "https://example.org/blog/linked")
        XCTAssertEqual(items[0].url, "https://example.org/blog/linked")
        XCTAssertEqual(items[1].url, nil)
        XCTAssertEqual(items[1].data["published"], "2003-06-11T07:30:00Z")
        XCTAssertEqual(items[1].key.count, 16, "a digest")
        XCTAssertEqual(try decode(feed("Bare"))[1].key, items[1].key, "stable")
        XCTAssertNotEqual(try decode(feed("Other"))[1].key, items[1].key)
        XCTAssertNotEqual(try decode(feed("Bare", date: "Thu, 12 Jun 2003 09:30:00 +0200"))[1].key, items[1].key)
    }

    func testRDF10() throws {
        let items = try decode(
            """
            <?xml version="1.0"?>
            <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
                     xmlns:dc="http://purl.org/dc/elements/1.1/">
              <channel rdf:about="https://example.org/"><title>RDF</title><link>https://example.org/</link></channel>
              <item rdf:about="https://example.org/rdf/1">
                <title>RDF one</title><link>https://example.org/rdf/1.html</link>
                <description>Text &amp; more</description><dc:date>2026-11-20T08:00:00+01:00</dc:date>
                <dc:creator>Bob</dc:creator><dc:subject>tag</dc:subject>
              </item>
              <item rdf:about="https://example.org/rdf/2"><title>RDF two</title><link>https://example.org/rdf/2.html</link></item>
            </rdf:RDF>
            """)
        XCTAssertEqual(items.map(\.key), ["https://example.org/rdf/1", "https://example.org/rdf/2"])
        XCTAssertEqual(items[0].url, "https://example.org/rdf/1.html")
        XCTAssertEqual(items[0].body, "Text & more")
        XCTAssertEqual(items[0].data["published"], "2026-11-20T07:00:00Z")
        XCTAssertEqual(items[0].data["author"], "Bob")
        XCTAssertEqual(items[0].data["categories"], ["tag"])
    }

    // MARK: Atom

    let atom = """
        <?xml version="1.0" encoding="utf-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://example.com/base/">
          <title>Atom</title><id>urn:feed</id><updated>2026-11-20T10:00:00Z</updated>
          <entry xml:base="posts/">
            <id>tag:example.com,2026:1</id>
            <title type="html">&lt;em&gt;Caf&amp;eacute;&lt;/em&gt; &amp;amp; bar</title>
            <link href="one.html"/>
            <link rel="enclosure" href="/audio/one.ogg" type="audio/ogg" length="99"/>
            <link rel="edit" href="https://example.com/edit/1"/>
            <published>2026-11-19T10:00:00Z</published>
            <updated>UPDATED</updated>
            <author><name>Ann</name></author>
            <category term="swift"/><category term="linux"/>
            <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>Hello <b>bold</b> world.</p><ul><li>one</li><li>two</li></ul></div></content>
          </entry>
          <entry>
            <id>tag:example.com,2026:2</id>
            <title>Plain &lt;not a tag&gt;</title>
            <link rel="alternate" type="text/html" href="../two.html"/>
            <updated>2026-11-18T10:00:00Z</updated>
            <summary type="text">Summary  text</summary>
          </entry>
        </feed>
        """

    func testAtom10() throws {
        let items = try decode(atom.replacingOccurrences(of: "UPDATED", with: "2026-11-20T10:00:00Z"))
        XCTAssertEqual(items.map(\.key), ["tag:example.com,2026:1", "tag:example.com,2026:2"])
        let a = items[0]
        XCTAssertEqual(a.title, "Café & bar")
        XCTAssertEqual(a.url, "https://example.com/base/posts/one.html", "xml:base of the feed, then of the entry")
        XCTAssertEqual(a.body, "Hello bold world.\none\ntwo")
        XCTAssertEqual(a.data["published"], "2026-11-19T10:00:00Z")
        XCTAssertEqual(a.data["updated"], "2026-11-20T10:00:00Z")
        XCTAssertEqual(a.data["author"], "Ann")
        XCTAssertEqual(a.data["categories"], ["swift", "linux"])
        XCTAssertEqual(a.data["enclosures"], [["url": "https://example.com/audio/one.ogg", "type": "audio/ogg", "length": 99]])
        let b = items[1]
        XCTAssertEqual(b.title, "Plain <not a tag>", "a text title is not markup")
        XCTAssertEqual(b.url, "https://example.com/two.html")
        XCTAssertEqual(b.body, "Summary text")
    }

    func testFingerprintIsUpdatedElseTextAndOrderDoesNotMatter() throws {
        let v1 = try decode(atom.replacingOccurrences(of: "UPDATED", with: "2026-11-20T10:00:00Z"))
        let v2 = try decode(atom.replacingOccurrences(of: "UPDATED", with: "2026-11-21T10:00:00Z"))
        XCTAssertNotEqual(v1[0].fingerprint, v2[0].fingerprint, "edited upstream: changed")
        XCTAssertEqual(v1[1].fingerprint, v2[1].fingerprint)
        // Same `updated`, other text: not a change (the date says what an edit is).
        let retitled = try decode(
            atom.replacingOccurrences(of: "UPDATED", with: "2026-11-20T10:00:00Z")
                .replacingOccurrences(of: "Summary  text", with: "Summary text, typo fixed"))
        XCTAssertEqual(retitled[1].fingerprint, v1[1].fingerprint)
        // No date: the text is the fingerprint.
        let rss = { (t: String) in "<rss><channel><item><guid>g</guid><title>\(t)</title></item></channel></rss>" }
        XCTAssertNotEqual(try decode(rss("one"))[0].fingerprint, try decode(rss("two"))[0].fingerprint)
        XCTAssertEqual(try decode(rss("one"))[0].fingerprint, try decode(rss("one"))[0].fingerprint)
    }

    func testAtom03() throws {
        let items = try decode(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <feed version="0.3" xmlns="http://purl.org/atom/ns#">
              <title>Old</title>
              <entry>
                <title type="text/html" mode="escaped">Old &lt;b&gt;style&lt;/b&gt;</title>
                <link rel="alternate" type="text/html" href="https://example.net/old/1"/>
                <id>tag:example.net,2005:1</id>
                <issued>2005-01-01T00:00:00Z</issued><modified>2005-01-02T00:00:00Z</modified>
                <summary>Short</summary>
              </entry>
            </feed>
            """)
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items[0].key, "tag:example.net,2005:1")
        XCTAssertEqual(items[0].title, "Old style")
        XCTAssertEqual(items[0].url, "https://example.net/old/1")
        XCTAssertEqual(items[0].data["published"], "2005-01-01T00:00:00Z")
        XCTAssertEqual(items[0].data["updated"], "2005-01-02T00:00:00Z")
        XCTAssertEqual(items[0].body, "Short")
    }

    func testAtomNamespaceByURINotPrefix() throws {
        let items = try decode(
            """
            <a:feed xmlns:a="http://www.w3.org/2005/Atom"><a:entry><a:id>x1</a:id><a:title>Prefixed</a:title>
            <a:link href="https://example.org/x1"/></a:entry><entry><id>not atom</id></entry></a:feed>
            """)
        XCTAssertEqual(items.map(\.key), ["x1"])
        XCTAssertEqual(items[0].title, "Prefixed")
    }

    // MARK: JSON Feed

    func testJSONFeed10WithNumericIds() throws {
        let items = try decode(
            """
            {"version": "https://jsonfeed.org/version/1", "title": "J", "items": [
              {"id": 42, "url": "/posts/42", "title": "Forty-two", "content_html": "<p>Hi &amp; <b>bye</b></p>",
               "date_published": "2026-11-20T10:00:00+02:00", "author": {"name": "Cleo"}},
              {"id": 1e3, "content_text": "Untitled post\\nsecond line"}
            ]}
            """)
        XCTAssertEqual(items.map(\.key), ["42", "1000"])
        XCTAssertEqual(items[0].url, "https://example.org/posts/42")
        XCTAssertEqual(items[0].body, "Hi & bye")
        XCTAssertEqual(items[0].data["published"], "2026-11-20T08:00:00Z")
        XCTAssertEqual(items[0].data["author"], "Cleo")
        XCTAssertEqual(items[1].title, "Untitled post", "no title: the first line of the text")
    }

    func testJSONFeed11() throws {
        let items = try decode(
            """
            \u{FEFF}{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": [
              {"id": "abc", "url": "https://example.org/abc", "title": "ABC", "summary": "Sum",
               "date_modified": "2026-11-21T10:00:00Z", "authors": [{"name": "Dee"}], "tags": ["a", "b"],
               "attachments": [{"url": "https://example.org/f.mp3", "mime_type": "audio/mpeg", "size_in_bytes": 5}]},
              {"url": "https://example.org/no-id", "title": "No id"}
            ]}
            """)
        XCTAssertEqual(items.map(\.key), ["abc", "https://example.org/no-id"])
        XCTAssertEqual(items[0].data["updated"], "2026-11-21T10:00:00Z")
        XCTAssertEqual(items[0].data["author"], "Dee")
        XCTAssertEqual(items[0].data["categories"], ["a", "b"])
        XCTAssertEqual(items[0].data["enclosures"], [["url": "https://example.org/f.mp3", "type": "audio/mpeg", "length": 5]])
        XCTAssertEqual(items[0].body, "Sum")
        XCTAssertThrowsError(try decode(#"{"items": []}"#), "JSON without a JSON Feed version")
    }

    // MARK: real-world breakage

    func testUndeclaredHTMLEntitiesKeepTheirText() throws {
        let items = try decode(
            """
            <rss><channel><item><guid>n</guid><title>Hello&nbsp;World &amp; caf&eacute; &copy;2026 &bogus; end</title>
            <description>a&nbsp;b</description></item></channel></rss>
            """)
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items[0].title, "Hello World & café ©2026 end")
        XCTAssertEqual(items[0].body, "a b")
    }

    func testWindows1252BytesDeclaredAsUTF8KeepTheRest() throws {
        let head = Array(#"<?xml version="1.0" encoding="UTF-8"?><rss><channel><item><guid>1</guid><title>caf"#.utf8)
        let bytes =
            head + [0xE9, 0x20, 0x93] + Array("quoted".utf8) + [0x94]
            + Array("</title></item><item><guid>2</guid><title>second é</title></item></channel></rss>".utf8)
        let items = try decode(bytes: bytes)
        XCTAssertEqual(items.map(\.key), ["1", "2"])
        XCTAssertTrue(items[0].title.hasPrefix("caf"))
        XCTAssertTrue(items[0].title.hasSuffix("quoted\u{FFFD}") || items[0].title.contains("quoted"), items[0].title)
        XCTAssertEqual(items[1].title, "second é")
        let parsed = try provider().parse(Data(bytes), charset: nil)
        XCTAssertTrue(parsed.repaired, "a repaired document is reported (a warning)")
    }

    func testCDATA() throws {
        let items = try decode(
            """
            <rss><channel><item><guid>c</guid><title><![CDATA[Fish & <i>Chips</i>]]></title>
            <description><![CDATA[<p>One &amp; <b>two</b></p><script>alert(1)</script><p>three</p>]]></description>
            </item></channel></rss>
            """)
        XCTAssertEqual(items[0].title, "Fish & Chips")
        XCTAssertEqual(items[0].body, "One & two\nthree")
    }

    func testDeclaredAndHTTPCharsets() throws {
        let latin1 =
            Array(#"<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><item><guid>e</guid><title>caf"#.utf8)
            + [0xE9] + Array("</title></item></channel></rss>".utf8)
        XCTAssertEqual(try decode(bytes: latin1)[0].title, "café")
        XCTAssertEqual(try decode(bytes: latin1, charset: "UTF-8")[0].title, "café", "the declaration wins over HTTP")
        let undeclared =
            Array("<rss><channel><item><guid>e</guid><title>caf".utf8) + [0xE9, 0x80]
            + Array("</title></item></channel></rss>".utf8)
        XCTAssertEqual(try decode(bytes: undeclared, charset: "windows-1252")[0].title, "café€", "the HTTP charset, when undeclared")
        XCTAssertEqual(FeedProvider.charset(ofContentType: #"application/rss+xml; charset="ISO-8859-1""#), "ISO-8859-1")
        XCTAssertNil(FeedProvider.charset(ofContentType: "application/rss+xml"))
    }

    func testBillionLaughsIsQuickAndBounded() throws {
        var dtd = #"<!ENTITY lol "lol">"#
        for i in 1...9 { dtd += "<!ENTITY lol\(i) \"" + String(repeating: "&lol\(i == 1 ? "" : String(i - 1));", count: 10) + "\">" }
        let doc = """
            <?xml version="1.0"?><!DOCTYPE rss [\(dtd)]>
            <rss><channel><item><guid>a</guid><title>&lol9;</title><description>&lol9;</description></item>
            <item><guid>b</guid><title>ok</title></item></channel></rss>
            """
        let start = Date()
        let items = (try? decode(doc)) ?? []
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        for item in items {
            XCTAssertLessThanOrEqual(item.title.count, FeedProvider.maxTitle)
            XCTAssertLessThanOrEqual(item.body.count, FeedProvider.maxBody)
        }
    }

    /// Issue 30 item 11: each text had its own budget, so one entity referenced in every item
    /// expanded into many times the document (a 120 KB entity in 500 items: minutes, a GB).
    /// The document's text is budgeted as a whole; the same entity used a few times still reads.
    func testEntityAmplificationIsBudgetedPerDocument() throws {
        let entity = String(repeating: "x", count: 10_000)
        func doc(items: Int) -> String {
            #"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY big "\#(entity)">]><rss version="2.0"><channel>"#
                + (0..<items).map { "<item><guid>g\($0)</guid><title>&big;</title><description>&big;</description></item>" }.joined()
                + "</channel></rss>"
        }
        let small = doc(items: 300)
        let limits = DocumentBudget.feed(documentSize: small.utf8.count)
        XCTAssertLessThan(limits.maxBytes, 300 * 2 * entity.count, "the shape amplifies past the budget")
        XCTAssertThrowsError(try decode(small)) { error in
            XCTAssertEqual(
                (error as? PollError)?.message,
                "the feed's text is more than \(limits.maxBytes) bytes with its entities expanded (tidings reads at most 4 × the document's size + 1 MiB, and 32 MiB): not read")
        }
        let items = try decode(doc(items: 20))
        XCTAssertEqual(items.count, 20, "an entity used a few times is read")
        XCTAssertEqual(items[0].title.count, FeedProvider.maxTitle)
    }

    func testLargeFeedIsCutToMaxEntries() throws {
        var xml = "<rss><channel>"
        for i in 0..<50_000 { xml += "<item><guid>g\(i)</guid><title>Entry \(i)</title></item>" }
        xml += "</channel></rss>"
        let start = Date()
        let items = try decode(xml)
        XCTAssertEqual(items.count, FeedProvider.defaultMaxEntries)
        XCTAssertEqual(items.first?.key, "g0")
        XCTAssertEqual(items.last?.key, "g499")
        XCTAssertLessThan(Date().timeIntervalSince(start), 20)
        XCTAssertEqual(try provider(maxEntries: 3).decode(Data(xml.utf8)).count, 3)
    }

    func testIncludeAndExcludeOnTheTitle() throws {
        let xml = """
            <rss><channel>
            <item><guid>1</guid><title>Release 1.0</title></item>
            <item><guid>2</guid><title>Nightly release 1.1-dev</title></item>
            <item><guid>3</guid><title>Blog post</title></item>
            </channel></rss>
            """
        let only = try provider(include: ["(?i)release"]).decode(Data(xml.utf8))
        XCTAssertEqual(only.map(\.key), ["1", "2"])
        let both = try provider(include: ["(?i)release"], exclude: ["(?i)nightly"]).decode(Data(xml.utf8))
        XCTAssertEqual(both.map(\.key), ["1"])
        XCTAssertEqual(try provider(exclude: ["post$"]).decode(Data(xml.utf8)).map(\.key), ["1", "2"])
    }

    func testNotAFeed() throws {
        XCTAssertThrowsError(try decode("<html><body><p>Hello</p></body></html>")) { error in
            XCTAssertTrue("\(error)".contains("not an RSS, Atom or JSON feed"), "\(error)")
        }
        XCTAssertThrowsError(try decode(""))
    }

    func testLinksAreHTTPOnlyAndCut() throws {
        let items = try decode(
            """
            <rss><channel><item><guid>j</guid><title>\(String(repeating: "long ", count: 100))</title>
            <link>javascript:alert(1)</link><description>\(String(repeating: "word ", count: 1000))</description></item></channel></rss>
            """)
        XCTAssertNil(items[0].url)
        XCTAssertEqual(items[0].title.count, FeedProvider.maxTitle)
        XCTAssertTrue(items[0].title.hasSuffix("…"))
        XCTAssertEqual(items[0].body.count, FeedProvider.maxBody)
    }

    // MARK: configuration

    func testConfigOptionsAndABadPatternNamesItsLine() throws {
        let c = try loadConfig(
            """
            [sources.blog]
            provider = "feed"
            url = "https://example.org/feed.xml"
            include = ["(?i)swift"]
            exclude = "beta"
            max_entries = 20
            """)
        let p = try XCTUnwrap(c.sources[0].instance as? FeedProvider)
        XCTAssertEqual(p.include.map(\.pattern), ["(?i)swift"])
        XCTAssertEqual(p.exclude.map(\.pattern), ["beta"])
        XCTAssertEqual(p.maxEntries, 20)
        let errors = try configErrors(
            """
            [sources.blog]
            provider = "feed"
            url = "https://example.org/feed.xml"
            include = ["(a"]
            """)
        XCTAssertEqual(errors.count, 1)
        XCTAssertEqual(errors.first?.line, 4)
        XCTAssertTrue(errors.first?.message.contains("'include': invalid regular expression") ?? false, "\(errors)")
        XCTAssertFalse(
            try configErrors(
                """
                [sources.blog]
                provider = "feed"
                url = "ftp://example.org/feed.xml"
                """
            ).isEmpty)
    }
}
