import TidingsApp
import XCTest

@testable import TidingsProviders

final class OPMLTests: XCTestCase {
    func outlines(_ s: String) throws -> [OPML.Outline] { try OPML.outlines(Array(s.utf8)) }

    /// OPML 2.0 with folders (nested), OPML 1.0 with `text` only and `category`, an HTML entity.
    func testNestedFoldersTitlesAndCategories() throws {
        let o = try outlines("""
            <?xml version="1.0" encoding="UTF-8"?>
            <opml version="2.0">
              <head><title>subs</title></head>
              <body>
                <outline text="Tech" title="Tech">
                  <outline text="Swift">
                    <outline type="rss" text="Swift.org" title="Swift.org" xmlUrl="https://swift.org/atom.xml" htmlUrl="https://swift.org/"/>
                  </outline>
                  <outline type="rss" text="LWN &amp; co" xmlUrl="https://lwn.net/headlines/rss"/>
                </outline>
                <outline type="rss" text="Caf&eacute;" xmlUrl="http://127.0.0.1/cafe.xml" category="/Food/Coffee,/Other"/>
                <outline text="just a link" htmlUrl="https://example.org/"/>
              </body>
            </opml>
            """)
        XCTAssertEqual(
            o,
            [
                OPML.Outline(title: "Swift.org", xmlURL: "https://swift.org/atom.xml", htmlURL: "https://swift.org/", folders: ["Tech", "Swift"], line: 7),
                OPML.Outline(title: "LWN & co", xmlURL: "https://lwn.net/headlines/rss", htmlURL: nil, folders: ["Tech"], line: 9),
                OPML.Outline(title: "Café", xmlURL: "http://127.0.0.1/cafe.xml", htmlURL: nil, folders: ["Food", "Coffee"], line: 11),
                OPML.Outline(title: "just a link", xmlURL: nil, htmlURL: "https://example.org/", folders: [], line: 12),
            ])
        let r = OPMLReader(fileName: "subs.opml").read(
            o.map { ($0.title, $0.xmlURL, $0.htmlURL, $0.folders, $0.line) })
        XCTAssertEqual(r.drafts.map(\.provider), ["feed", "feed", "feed"])
        XCTAssertEqual(r.drafts[0].options.map(\.key), ["url", "group"])
        XCTAssertEqual(r.drafts[0].options[1].value, .string("Tech/Swift"))
        XCTAssertEqual(r.notImportable, [NotImportable(what: "just a link", line: 12, reason: "no xmlUrl: not a feed subscription")])
    }

    /// Entity declarations are refused before parsing (a bomb never reaches libxml2); a document
    /// that is not well-formed, or nested past libxml2's limit, is refused whole with its line.
    func testHostileDocumentsAreRefusedWhole() {
        let bomb = """
            <?xml version="1.0"?>
            <!DOCTYPE opml [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>
            <opml version="2.0"><body><outline text="&b;" xmlUrl="http://127.0.0.1/"/></body></opml>
            """
        XCTAssertThrowsError(try outlines(bomb)) { e in
            let e = e as! OPML.ReadError
            XCTAssertEqual(e.line, 2)
            XCTAssertTrue(e.message.contains("declares entities"))
        }
        XCTAssertThrowsError(try outlines("<opml><body><outline text='a' xmlUrl='http://127.0.0.1/'>\n</body></opml>")) { e in
            XCTAssertTrue((e as! OPML.ReadError).message.contains("not well-formed"), "\(e)")
        }
        let deep = "<opml><body>" + String(repeating: "<outline text='x'>", count: 300) + String(repeating: "</outline>", count: 300) + "</body></opml>"
        XCTAssertThrowsError(try outlines(deep)) { e in XCTAssertTrue((e as! OPML.ReadError).message.contains("not well-formed"), "\(e)") }
        XCTAssertThrowsError(try OPML.outlines([UInt8](repeating: 32, count: OPML.maxBytes + 1))) { e in
            XCTAssertTrue((e as! OPML.ReadError).message.contains("larger than 16 MiB"))
        }
        XCTAssertThrowsError(try outlines("<rss><channel/></rss>")) { e in XCTAssertTrue("\(e)".contains("not <opml>")) }
    }

    /// The export escapes what XML must, and reads back as it was written.
    func testExportEscapesAndReadsBack() throws {
        let feeds = [
            OPML.Feed(title: "a \"quoted\" <b> & 'c'", xmlURL: "http://127.0.0.1/f?a=1&b=2"),
            OPML.Feed(title: "news", xmlURL: "http://127.0.0.1/n.xml", htmlURL: "http://127.0.0.1/", group: "Tech & Co"),
            OPML.Feed(title: "bell\u{7}\ttab", xmlURL: "http://127.0.0.1/x", group: "Tech & Co"),
        ]
        let text = OPML.document(feeds)
        XCTAssertTrue(text.contains("xmlUrl=\"http://127.0.0.1/f?a=1&amp;b=2\""), text)
        XCTAssertTrue(text.contains("category=\"/Tech &amp; Co\""), text)
        let back = try outlines(text)
        XCTAssertEqual(back.map(\.title), ["a \"quoted\" <b> & 'c'", "news", "bell\ttab"])
        XCTAssertEqual(back.map(\.xmlURL), feeds.map(\.xmlURL))
        XCTAssertEqual(back.map(\.folders), [[], ["Tech & Co"], ["Tech & Co"]])
        XCTAssertEqual(back[1].htmlURL, "http://127.0.0.1/")
    }
}
