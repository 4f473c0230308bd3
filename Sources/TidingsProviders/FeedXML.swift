import CLibXML2
import FoundationEssentials
import Glibc
import TidingsPOSIX
import TidingsPluginAPI

/// RSS, RDF and Atom documents through libxml2: parsed in recovery mode, walked node by node.
enum XMLFeed {
    static let atom10 = "http://www.w3.org/2005/Atom"
    static let atom03 = "http://purl.org/atom/ns#"
    static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    static let dc = "http://purl.org/dc/elements/1.1/"
    static let content = "http://purl.org/rss/1.0/modules/content/"
    static let xml = "http://www.w3.org/XML/1998/namespace"

    /// Recover from errors; never touch the network; say nothing on stderr. Not NOENT (entities
    /// stay references, expanded only by ``TextCollector`` within its budget) nor DTDLOAD (no
    /// external subset), nor HUGE (libxml2's limits on depth and text size stay on).
    static let options = Int32(
        bitPattern: XML_PARSE_RECOVER.rawValue | XML_PARSE_NONET.rawValue
            | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)

    /// libxml2 loaded (at first use: DESIGN §15) and set up, and its error printers silenced on
    /// this thread; else why it cannot be loaded (its soname and the Debian package to install).
    static func setUp() throws(PollError) {
        if let missing = tidings_xml_load() { throw PollError(.transient, String(cString: missing)) }
        tidings_xml_quiet()
    }

    /// The entries of an XML feed (the first `limit`), and whether libxml2 had to repair it.
    static func entries(_ input: [UInt8], charset: String?, feedURL: URL, limit: Int) throws -> ([Entry], Bool) {
        try setUp()
        let bytes = namedEntitiesAsNumeric(input)
        guard bytes.count < Int32.max else { throw PollError(.transient, "feed document too large") }
        // The HTTP charset counts only when the document names no encoding of its own.
        let encoding = declaresEncoding(bytes) ? nil : charset
        guard let ctxt = tidings_xmlNewParserCtxt() else { throw PollError(.transient, "libxml2: out of memory") }
        defer { tidings_xmlFreeParserCtxt(ctxt) }
        func read(_ encoding: String?) -> xmlDocPtr? {
            bytes.withUnsafeBufferPointer { buf in
                buf.withMemoryRebound(to: CChar.self) { chars in
                    tidings_xmlCtxtReadMemory(ctxt, chars.baseAddress, Int32(chars.count), nil, encoding, options)
                }
            }
        }
        var doc = read(encoding)
        if doc.flatMap({ tidings_xmlDocGetRootElement($0) }) == nil, encoding != nil {
            if let doc { tidings_xmlFreeDoc(doc) }
            doc = read(nil)
        }
        guard let doc else {
            throw PollError(.transient, "not a feed: no XML could be read (body: \(PollError.excerpt(Data(input))))")
        }
        defer { tidings_xmlFreeDoc(doc) }
        guard let rootPtr = tidings_xmlDocGetRootElement(doc) else {
            throw PollError(.transient, "not a feed: no XML element could be read (body: \(PollError.excerpt(Data(input))))")
        }
        let repaired = ctxt.pointee.wellFormed == 0
        let budget = DocumentBudget.feed(documentSize: input.count)
        let root = XNode(rootPtr, budget)
        var entries: [Entry] = []
        switch (root.name, root.namespace) {
        case ("rss", _):
            // RSS 0.9x and 2.0: rss/channel/item, elements in no namespace.
            let channel = root.child("channel", nil)
            for item in (channel?.elements ?? []) where item.name == "item" && item.namespace == nil {
                if entries.count >= limit || budget.spent { break }
                entries.append(rssEntry(item, ns: nil, rdf: false, feedURL: feedURL))
            }
        case ("RDF", rdf):
            // RSS 0.90 and 1.0: items are siblings of the channel, in the RSS namespace.
            for item in root.elements where item.name == "item" {
                if entries.count >= limit || budget.spent { break }
                entries.append(rssEntry(item, ns: item.namespace, rdf: true, feedURL: feedURL))
            }
        case ("feed", atom10?), ("feed", atom03?):
            let ns = root.namespace!
            for entry in root.elements where entry.name == "entry" && entry.namespace == ns {
                if entries.count >= limit || budget.spent { break }
                entries.append(atomEntry(entry, ns: ns, feedURL: feedURL))
            }
        case (let name, let ns):
            let qualified = ns.map { " in namespace \($0)" } ?? ""
            throw PollError(.transient, "not an RSS, Atom or JSON feed: the document is <\(name)>\(qualified)")
        }
        try budget.check()
        return (entries, repaired)
    }

    // MARK: RSS and RDF

    static func rssEntry(_ item: XNode, ns: String?, rdf isRDF: Bool, feedURL: URL) -> Entry {
        var e = Entry()
        var permalink: String?
        if !isRDF {
            if let guid = item.child("guid", nil) {
                let id = guid.text.trimmed()
                e.id = id
                if guid.attr("isPermaLink")?.trimmed(newlines: false).lowercased() != "false" { permalink = id }
            }
        } else {
            e.id = item.attr("about", ns: rdf)
        }
        if let link = item.child("link", ns) {
            e.link = FeedText.absolute(link.text, bases: link.bases, feedURL: feedURL)
        }
        // A permalink guid is the link when there is none; only an absolute one (many feeds
        // leave isPermaLink out on guids that are no URL at all).
        if e.link == nil, let permalink, let u = URL(string: permalink), let scheme = u.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        {
            e.link = FeedText.absolute(permalink, feedURL: feedURL)
        }
        e.title = FeedText.line(HTMLText.text(item.child("title", ns)?.text ?? "", budget: item.budget))
        let summary = item.child("description", ns) ?? item.child("encoded", content)
        e.body = HTMLText.text(summary?.text ?? "", budget: item.budget)
        e.published = FeedText.date((item.child("pubDate", ns) ?? item.child("date", dc))?.text)
        e.author = FeedText.line((item.child("author", ns) ?? item.child("creator", dc))?.text ?? "")
        e.categories = (item.children("category", ns) + item.children("subject", dc)).map { FeedText.line($0.text) }
            .filter { !$0.isEmpty }
        e.enclosures = item.children("enclosure", ns).compactMap { enc in
            enclosure(url: enc.attr("url"), type: enc.attr("type"), length: enc.attr("length"), bases: enc.bases, feedURL: feedURL)
        }
        return e
    }

    // MARK: Atom

    static func atomEntry(_ entry: XNode, ns: String, feedURL: URL) -> Entry {
        var e = Entry()
        e.id = entry.child("id", ns)?.text.trimmed()
        let links = entry.children("link", ns)
        func rel(_ l: XNode) -> String { l.attr("rel")?.trimmed(newlines: false).lowercased() ?? "alternate" }
        let alternates = links.filter { rel($0) == "alternate" || rel($0) == "http://www.iana.org/assignments/relation/alternate" }
        let preferred = alternates.first { ($0.attr("type") ?? "text/html").lowercased().contains("html") } ?? alternates.first
        if let link = preferred { e.link = FeedText.absolute(link.attr("href"), bases: link.bases, feedURL: feedURL) }
        e.title = FeedText.line(textConstruct(entry.child("title", ns)))
        e.body = FeedText.block(textConstruct(entry.child("summary", ns) ?? entry.child("content", ns)))
        e.published = FeedText.date((entry.child("published", ns) ?? entry.child("issued", ns) ?? entry.child("created", ns))?.text)
        e.updated = FeedText.date((entry.child("updated", ns) ?? entry.child("modified", ns))?.text)
        if let name = entry.child("author", ns)?.child("name", ns)?.text { e.author = FeedText.line(name) }
        e.categories =
            (entry.children("category", ns).compactMap { $0.attr("term") ?? $0.attr("label") }
            + entry.children("subject", dc).map(\.text)).map(FeedText.line).filter { !$0.isEmpty }
        e.enclosures = links.filter { rel($0) == "enclosure" }.compactMap { l in
            enclosure(url: l.attr("href"), type: l.attr("type"), length: l.attr("length"), bases: l.bases, feedURL: feedURL)
        }
        return e
    }

    /// An Atom text construct as text: `text` as is, `html` (escaped markup) and `xhtml` (a
    /// `div` of markup) reduced to text. Atom 0.3 says `mode="escaped"` / `mode="xml"` and
    /// MIME types.
    static func textConstruct(_ node: XNode?) -> String {
        guard let node else { return "" }
        let type = (node.attr("type") ?? "text").lowercased()
        let mode = node.attr("mode")?.lowercased()
        if type == "xhtml" || type == "application/xhtml+xml" || (mode == "xml" && type.contains("html")) {
            var c = TextCollector(blocks: true, budget: node.budget)
            c.walk(node.p.pointee.children)
            return c.out
        }
        if type == "html" || type == "text/html" || mode == "escaped" { return HTMLText.text(node.text, budget: node.budget) }
        return node.text
    }

    static func enclosure(url: String?, type: String?, length: String?, bases: [String], feedURL: URL) -> JSONValue? {
        guard let u = FeedText.absolute(url, bases: bases, feedURL: feedURL) else { return nil }
        var o: [String: JSONValue] = ["url": .string(u)]
        if let type = type?.trimmed(newlines: false), !type.isEmpty { o["type"] = .string(FeedText.cut(type, 200)) }
        if let length = length.flatMap({ Int($0.trimmed(newlines: false)) }), length >= 0 { o["length"] = .number(Double(length)) }
        return .object(o)
    }

    // MARK: bytes before parsing

    /// Whether the document names its own encoding (a BOM, UTF-16/32 bytes, or an XML
    /// declaration with `encoding`): then libxml2 follows it and the HTTP charset does not count.
    static func declaresEncoding(_ b: [UInt8]) -> Bool {
        if b.starts(with: [0xEF, 0xBB, 0xBF]) || b.starts(with: [0xFE, 0xFF]) || b.starts(with: [0xFF, 0xFE]) { return true }
        if b.count >= 2 && (b[0] == 0 || b[1] == 0) { return true }
        guard b.starts(with: Array("<?xml".utf8)) else { return false }
        let head = Array(b.prefix(512))
        var end = head.count
        for i in 0..<max(head.count - 1, 0) where head[i] == UInt8(ascii: "?") && head[i + 1] == UInt8(ascii: ">") {
            end = i
            break
        }
        return String(decoding: head[..<end], as: UTF8.self).contains("encoding")
    }

    /// Named character references as numeric ones: HTML's (`&nbsp;`, `&eacute;`), which feeds
    /// use without declaring them, and XML's five (`&amp;` …). libxml2's recovery drops an
    /// undeclared reference, and once it has met one error it drops every named reference after
    /// it (`&amp;` and `&lt;` too), so words run together and markup loses its brackets; numeric
    /// references it always keeps. CDATA sections and comments are left as they are, and so
    /// are unknown names (the document's own entities) and documents in UTF-16/32.
    static func namedEntitiesAsNumeric(_ b: [UInt8]) -> [UInt8] {
        if b.count >= 2 && (b[0] == 0 || b[1] == 0 || b.starts(with: [0xFE, 0xFF]) || b.starts(with: [0xFF, 0xFE])) { return b }
        guard b.contains(UInt8(ascii: "&")) else { return b }
        let predefined: [String: UInt32] = ["amp": 38, "lt": 60, "gt": 62, "quot": 34, "apos": 39]
        func isAlpha(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
        func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        var out: [UInt8] = []
        var copied = 0
        b.withUnsafeBufferPointer { buf in
            let base = buf.baseAddress!
            let n = buf.count
            // memchr/memcmp: a document of megabytes is scanned at C speed, in debug builds too.
            func find(_ needle: StaticString, from i: Int) -> Int {
                let p = needle.utf8Start
                let m = needle.utf8CodeUnitCount
                var k = i
                while k < n, let hit = memchr(base + k, Int32(p[0]), n - k) {
                    let h = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                    if h + m <= n && memcmp(base + h, p, m) == 0 { return h }
                    k = h + 1
                }
                return n
            }
            func nextAmp(from i: Int) -> Int {
                guard i < n, let hit = memchr(base + i, Int32(UInt8(ascii: "&")), n - i) else { return n }
                return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            }
            var i = 0
            var bang = find("<!", from: 0)
            while true {
                let a = nextAmp(from: i)
                if a >= n { break }
                if bang < a {
                    // `<![CDATA[…]]>` and `<!--…-->` are skipped whole; other `<!` (a DOCTYPE) are not.
                    if find("<![CDATA[", from: bang) == bang {
                        i = min(find("]]>", from: bang + 9) + 3, n)
                    } else if find("<!--", from: bang) == bang {
                        i = min(find("-->", from: bang + 4) + 3, n)
                    } else {
                        i = bang + 2
                    }
                    bang = find("<!", from: max(i, bang + 2))
                    continue
                }
                var j = a + 1
                while j < n, j - a <= 32, isAlpha(base[j]) || isDigit(base[j]) { j += 1 }
                if j > a + 1, j < n, base[j] == UInt8(ascii: ";"), isAlpha(base[a + 1]) {
                    let name = Array(buf[(a + 1)..<j])
                    let value =
                        predefined[String(decoding: name, as: UTF8.self)]
                        ?? (name + [0]).withUnsafeBufferPointer({ tidings_htmlEntityLookup($0.baseAddress)?.pointee.value })
                    if let value {
                        if out.isEmpty { out.reserveCapacity(n + n / 16) }
                        out.append(contentsOf: buf[copied..<a])
                        out.append(contentsOf: "&#\(value);".utf8)
                        copied = j + 1
                        i = j + 1
                        continue
                    }
                }
                i = a + 1
            }
            if copied > 0 { out.append(contentsOf: buf[copied...]) }
        }
        return copied == 0 ? b : out
    }
}

/// Markup (an RSS description, an Atom `html` text, JSON Feed `content_html`) as plain text,
/// through libxml2's HTML parser: entities decoded, tags dropped, block elements on their own
/// lines, whitespace collapsed.
enum HTMLText {
    static let options = Int32(
        bitPattern: HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NONET.rawValue
            | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue)
    /// Markup beyond this many bytes is not read (a body is cut far shorter anyway).
    static let maxInput = 256 << 10

    /// `budget`: the document's, when the markup comes from one (its text counts against it).
    static func text(_ html: String, budget: DocumentBudget? = nil) -> String {
        if budget?.spent == true { return "" }
        // Without libxml2 (not installed: the poll that parsed the document said so), the markup as it is.
        guard html.contains("<") || html.contains("&"), (try? XMLFeed.setUp()) != nil else { return FeedText.block(html) }
        var bytes = Array(html.utf8.prefix(maxInput))
        while let last = bytes.last, last & 0xC0 == 0x80 { bytes.removeLast() }  // not inside a character
        if let last = bytes.last, last >= 0xC0 { bytes.removeLast() }
        guard !bytes.isEmpty else { return "" }
        let doc = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { chars in
                tidings_htmlReadMemory(chars.baseAddress, Int32(chars.count), nil, "UTF-8", options)
            }
        }
        guard let doc else { return FeedText.block(html) }
        defer { tidings_xmlFreeDoc(doc) }
        var c = TextCollector(blocks: true, budget: budget)
        c.walk(doc.pointee.children)
        return FeedText.block(c.out)
    }
}

/// The text under a node. Entity references are followed (the document's own entities), within
/// a budget of nodes and bytes per text, and the document's ``DocumentBudget`` in all: no document
/// can make this walk long or its result large.
struct TextCollector {
    var out = ""
    var bytes = 0
    var visits = 0
    /// Block elements start and end a line; `script`/`style`/`head` are skipped (for markup).
    let blocks: Bool
    let budget: DocumentBudget?
    static let maxBytes = 256 << 10
    static let maxVisits = 200_000
    static let maxDepth = 300

    static let blockElements: Set<String> = [
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "figcaption", "figure",
        "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
        "section", "summary", "table", "tr", "ul",
    ]
    static let skipped: Set<String> = ["script", "style", "head", "template", "noscript"]

    init(blocks: Bool = false, budget: DocumentBudget?) {
        self.blocks = blocks
        self.budget = budget
    }

    mutating func walk(_ first: xmlNodePtr?, depth: Int = 0) {
        guard depth < Self.maxDepth else { return }
        var next = first
        while let n = next, visits < Self.maxVisits, bytes < Self.maxBytes, budget?.visit() ?? true {
            visits += 1
            next = n.pointee.next
            switch n.pointee.type {
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if let t = n.pointee.content { append(String(cString: t)) }
            case XML_ENTITY_REF_NODE:
                // The reference's `children` is the declaration; its children are the parsed value.
                if let decl = n.pointee.children {
                    let entity = UnsafeMutableRawPointer(decl).assumingMemoryBound(to: xmlEntity.self)
                    walk(entity.pointee.children, depth: depth + 1)
                }
            case XML_ELEMENT_NODE:
                guard blocks else {
                    walk(n.pointee.children, depth: depth + 1)
                    continue
                }
                let name = n.pointee.name.map { String(cString: $0).lowercased() } ?? ""
                if Self.skipped.contains(name) { continue }
                let block = Self.blockElements.contains(name)
                if block { append("\n") }
                walk(n.pointee.children, depth: depth + 1)
                if block { append("\n") }
            default:
                break
            }
        }
    }

    private mutating func append(_ s: String) {
        out += s
        bytes += s.utf8.count
        budget?.add(bytes: s.utf8.count)
    }
}

/// An element of a parsed document.
struct XNode {
    let p: xmlNodePtr
    /// The document's: every text read through this node counts against it.
    let budget: DocumentBudget
    init(_ p: xmlNodePtr, _ budget: DocumentBudget) {
        self.p = p
        self.budget = budget
    }

    var name: String { p.pointee.name.map { String(cString: $0) } ?? "" }
    var namespace: String? { p.pointee.ns?.pointee.href.map { String(cString: $0) } }

    /// Element children, in order.
    var elements: [XNode] {
        var out: [XNode] = []
        var next = p.pointee.children
        while let n = next {
            if n.pointee.type == XML_ELEMENT_NODE { out.append(XNode(n, budget)) }
            next = n.pointee.next
        }
        return out
    }

    func child(_ name: String, _ ns: String?) -> XNode? {
        var next = p.pointee.children
        while let n = next {
            if n.pointee.type == XML_ELEMENT_NODE {
                let x = XNode(n, budget)
                if x.name == name && x.namespace == ns { return x }
            }
            next = n.pointee.next
        }
        return nil
    }

    func children(_ name: String, _ ns: String?) -> [XNode] {
        elements.filter { $0.name == name && $0.namespace == ns }
    }

    /// The text content (entities within the ``TextCollector`` budget), not trimmed.
    var text: String {
        var c = TextCollector(budget: budget)
        c.walk(p.pointee.children)
        return c.out
    }

    /// An attribute's value: `ns` nil for one without a namespace.
    func attr(_ name: String, ns: String? = nil) -> String? {
        var next = p.pointee.properties
        while let a = next {
            let attrName = a.pointee.name.map { String(cString: $0) } ?? ""
            let attrNS = a.pointee.ns?.pointee.href.map { String(cString: $0) }
            if attrName == name && attrNS == ns {
                var c = TextCollector(budget: budget)
                c.walk(a.pointee.children)
                return c.out
            }
            next = a.pointee.next
        }
        return nil
    }

    /// The `xml:base` values in force here, outermost first.
    var bases: [String] {
        var out: [String] = []
        var next: xmlNodePtr? = p
        while let n = next, n.pointee.type == XML_ELEMENT_NODE {
            if let b = XNode(n, budget).attr("base", ns: XMLFeed.xml) { out.append(b) }
            next = n.pointee.parent
        }
        return out.reversed()
    }
}
