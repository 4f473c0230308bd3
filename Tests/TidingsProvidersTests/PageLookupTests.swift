import Foundation
import XCTest

@testable import TidingsPluginAPI
@testable import TidingsProviders

/// What `tidings add` reads from a response: feeds by content, the feeds a page announces.
final class PageLookupTests: XCTestCase {
    private let page = URL(string: "http://127.0.0.1:8080/blog/post.html")!

    private func feeds(_ head: String, body: String = "") throws -> [AnnouncedFeed] {
        try PageLookup.announcedFeeds(Data("<html><head>\(head)</head><body>\(body)</body></html>".utf8), contentType: "text/html", pageURL: page)
    }

    func testRelativeHrefsResolveAgainstBaseThenThePage() throws {
        XCTAssertEqual(try feeds(#"<link rel="alternate" type="application/rss+xml" href="../rss.xml">"#).map(\.url), ["http://127.0.0.1:8080/rss.xml"])
        XCTAssertEqual(
            try feeds(#"<base href="/feeds/"><link rel="alternate" type="application/atom+xml" href="atom.xml" title=" The  Blog ">"#),
            [AnnouncedFeed(url: "http://127.0.0.1:8080/feeds/atom.xml", type: "application/atom+xml", title: "The  Blog")])
        // Only the first <base> counts, as in browsers.
        XCTAssertEqual(
            try feeds(#"<base href="http://127.0.0.1:9/a/"><base href="/b/"><link rel="alternate" type="application/feed+json" href="f.json">"#).map(\.url),
            ["http://127.0.0.1:9/a/f.json"])
    }

    func testOnlyAlternateFeedTypesEachOnceAndOnlyHTTP() throws {
        let head = """
            <link rel="stylesheet" type="text/css" href="/s.css">
            <link rel="alternate" type="text/html" hreflang="de" href="/de/">
            <LINK REL="Alternate" TYPE="Application/RSS+XML; charset=utf-8" HREF="/rss.xml">
            <link rel="alternate" type="application/rss+xml" href="/rss.xml">
            <link rel="alternate" type="application/atom+xml" href="javascript:alert(1)">
            <link rel="alternate" type="application/atom+xml" href="ftp://127.0.0.1/a.xml">
            <link rel="alternate" type="application/atom+xml">
            """
        XCTAssertEqual(try feeds(head).map(\.url), ["http://127.0.0.1:8080/rss.xml"])
        // In the body too (pages that put their links late).
        XCTAssertEqual(try feeds("", body: #"<link rel="alternate" type="application/atom+xml" href="/late.xml">"#).map(\.url), ["http://127.0.0.1:8080/late.xml"])
        XCTAssertEqual(try feeds("<title>none</title>"), [])
    }

    /// Hostile pages: deep nesting is a clear error (libxml2's limit), and 100,000 links are
    /// read within the element budget, each address once.
    func testHostilePagesAreBounded() throws {
        let deep = String(repeating: "<div>", count: 400) + #"<link rel="alternate" type="application/rss+xml" href="/x">"#
        XCTAssertThrowsError(try PageLookup.announcedFeeds(Data("<html><body>\(deep)</body></html>".utf8), contentType: nil, pageURL: page)) { e in
            XCTAssertTrue("\(e)".contains("nests elements"), "\(e)")
        }
        let many = String(repeating: #"<link rel="alternate" type="application/rss+xml" href="/same.xml">"#, count: 100_000)
        XCTAssertEqual(try feeds(many).map(\.url), ["http://127.0.0.1:8080/same.xml"])
    }

    func testAFeedIsAFeedByItsContentWhateverItsType() {
        let rss = Data(#"<?xml version="1.0"?><rss version="2.0"><channel><title>x</title><item><guid>1</guid><title>One</title></item></channel></rss>"#.utf8)
        XCTAssertEqual(PageLookup.feedItems(rss, contentType: "text/html", url: page)?.map(\.title), ["One"])
        let json = Data(#"{"version": "https://jsonfeed.org/version/1.1", "items": [{"id": "a", "title": "A"}]}"#.utf8)
        XCTAssertEqual(PageLookup.feedItems(json, contentType: "application/json", url: page)?.count, 1)
        XCTAssertNil(PageLookup.feedItems(Data("<html><body><p>x</p></body></html>".utf8), contentType: "application/rss+xml", url: page))
        XCTAssertNil(PageLookup.feedItems(Data(#"{"items": []}"#.utf8), contentType: "application/feed+json", url: page))
        XCTAssertTrue(PageLookup.looksLikeJSON(Data(" [1]".utf8)))
        XCTAssertEqual(PageLookup.title(Data("<html><head><title>\n A\u{1B}[31m page </title></head></html>".utf8), contentType: nil), "A[31m page")
    }
}
