import CLibXML2
import FoundationEssentials
import TidingsPluginAPI

/// A feed a page announces: `<link rel="alternate" type="application/rss+xml" href="…">`.
package struct AnnouncedFeed: Sendable, Equatable {
    /// Absolute (resolved against the page's `<base href>` and the page's address).
    package var url: String
    /// `application/rss+xml`, `application/atom+xml` or `application/feed+json`.
    package var type: String
    /// The link's `title`, one line, when it has one.
    package var title: String?

    package init(url: String, type: String, title: String? = nil) {
        self.url = url
        self.type = type
        self.title = title
    }
}

/// What `tidings add` asks of a response before it decides what a web address is (DESIGN §14):
/// whether the body is a feed (by content, with the feed provider's own parser), the feeds an
/// HTML page announces, and its title. Plain values out; libxml2 stays in this module.
package enum PageLookup {
    /// The `type`s of `<link rel="alternate">` that announce a feed.
    package static let feedTypes: Set<String> = ["application/rss+xml", "application/atom+xml", "application/feed+json"]

    /// Elements visited at most while looking for links (a hostile page cannot make it slow).
    static let elementBudget = 200_000

    /// The body's items when it is an RSS, Atom or JSON Feed document, whatever its
    /// `Content-Type` says; nil when it is not one.
    package static func feedItems(_ body: Data, contentType: String?, url: URL) -> [Item]? {
        try? FeedProvider(url: url).decode(body, charset: FeedProvider.charset(ofContentType: contentType))
    }

    /// Whether a response is HTML (or XML) to look into: its type says so, or it has none and
    /// the body starts with `<`.
    package static func isMarkup(contentType: String?, body: Data) -> Bool {
        PageDocument.isMarkup(type: (contentType ?? "").lowercased(), body: body)
    }

    /// Whether a body is JSON (its first character is `{` or `[`).
    package static func looksLikeJSON(_ body: Data) -> Bool {
        let first = body.prefix(1024).first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
        return first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
    }

    /// The feeds `body` (an HTML page fetched from `pageURL`) announces, in document order, each
    /// once; relative `href`s resolved against the first `<base href>` and then `pageURL`. Only
    /// http and https addresses are kept.
    package static func announcedFeeds(_ body: Data, contentType: String?, pageURL: URL) throws -> [AnnouncedFeed] {
        let document = try PageDocument(body, charset: FeedProvider.charset(ofContentType: contentType))
        var base: URL? = nil
        var links: [(href: String, type: String, title: String?)] = []
        HTMLTree.forEachElement(under: document.root, budget: elementBudget, maxDepth: PageDocument.maxDepth) { e in
            switch HTMLTree.name(e) {
            case "base":
                if base == nil, let href = HTMLTree.attribute(e, "href") {
                    base = URL(string: href.trimmed(newlines: true), relativeTo: pageURL)?.absoluteURL
                }
            case "link":
                let rel = (HTMLTree.attribute(e, "rel") ?? "").lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
                guard rel.contains("alternate"), let href = HTMLTree.attribute(e, "href") else { break }
                let type = (HTMLTree.attribute(e, "type") ?? "").lowercased().split(separator: ";").first.map { String($0).trimmed(newlines: true) } ?? ""
                guard feedTypes.contains(type) else { break }
                let title = HTMLTree.attribute(e, "title").map { TerminalText.line($0).trimmed(newlines: true) }
                links.append((href, type, title.flatMap { $0.isEmpty ? nil : $0 }))
            default: break
            }
            return true
        }
        var seen: Set<String> = []
        var feeds: [AnnouncedFeed] = []
        for link in links {
            guard let u = URL(string: link.href.trimmed(newlines: true), relativeTo: base ?? pageURL)?.absoluteURL,
                let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https"
            else { continue }
            let text = u.absoluteString
            if seen.insert(text).inserted { feeds.append(AnnouncedFeed(url: text, type: link.type, title: link.title)) }
        }
        return feeds
    }

    /// The page's `<title>`, one line, when it has one.
    package static func title(_ body: Data, contentType: String?) -> String? {
        guard let document = try? PageDocument(body, charset: FeedProvider.charset(ofContentType: contentType)) else { return nil }
        var title: String? = nil
        HTMLTree.forEachElement(under: document.root, budget: elementBudget, maxDepth: PageDocument.maxDepth) { e in
            guard HTMLTree.name(e) == "title" else { return true }
            var text = ""
            var child = e.pointee.children
            while let c = child, text.utf8.count < 1000 {
                if c.pointee.type == XML_TEXT_NODE, let t = c.pointee.content { text += String(cString: t) }
                child = c.pointee.next
            }
            title = TerminalText.line(text).trimmed(newlines: true)
            return false
        }
        return title.flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
    }
}
