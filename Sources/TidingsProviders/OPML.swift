import CLibXML2
import FoundationEssentials
import TidingsPluginAPI

/// OPML subscription lists (1.0 and 2.0) through libxml2, next to the feed parser: what
/// `tidings import opml` reads. Plain values out; no C pointer leaves this file.
///
/// Bounded: at most ``maxBytes`` of file and ``maxOutlines`` outlines; a document that
/// declares entities (`<!ENTITY`) is refused before parsing (an OPML file needs none: an
/// entity bomb never reaches the parser); named HTML entities (`&eacute;`) become numeric
/// references as for feeds; libxml2's nesting limit (256) stays on. The document must be
/// well-formed: an import reads a file whole or not at all, so there is no recovery mode.
package enum OPML {
    package static let maxBytes = 16 << 20
    package static let maxOutlines = 100_000

    /// One outline that subscribes to something (it has an `xmlUrl`), or a leaf without one.
    package struct Outline: Sendable, Equatable {
        /// `title`, else `text` (OPML 1.0 readers wrote one or the other).
        package var title: String
        package var xmlURL: String?
        package var htmlURL: String?
        /// The folders it sits in (their titles, outermost first), else its `category`
        /// attribute's first path (`/Tech/Swift` → ["Tech", "Swift"]).
        package var folders: [String]
        package var line: Int

        package init(title: String, xmlURL: String?, htmlURL: String?, folders: [String], line: Int) {
            self.title = title
            self.xmlURL = xmlURL
            self.htmlURL = htmlURL
            self.folders = folders
            self.line = line
        }
    }

    package struct ReadError: Error, Sendable, Equatable, CustomStringConvertible {
        package var line: Int?
        package var message: String
        package var description: String { line.map { "line \($0): \(message)" } ?? message }
        init(_ message: String, line: Int? = nil) {
            self.message = message
            self.line = line
        }
    }

    package static func outlines(_ input: [UInt8]) throws(ReadError) -> [Outline] {
        guard input.count <= maxBytes else { throw ReadError("the file is larger than \(maxBytes >> 20) MiB (an OPML subscription list is far smaller)") }
        if let at = find(Array("<!ENTITY".utf8), in: input) {
            throw ReadError("the document declares entities (an OPML file needs none; refused)", line: lineOf(at, in: input))
        }
        do { try XMLFeed.setUp() } catch { throw ReadError("\(error)") }
        let bytes = XMLFeed.namedEntitiesAsNumeric(input)
        guard let ctxt = tidings_xmlNewParserCtxt() else { throw ReadError("libxml2: out of memory") }
        defer { tidings_xmlFreeParserCtxt(ctxt) }
        let options = Int32(bitPattern: XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        let doc = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { chars in
                tidings_xmlCtxtReadMemory(ctxt, chars.baseAddress, Int32(chars.count), nil, nil, options)
            }
        }
        defer { if let doc { tidings_xmlFreeDoc(doc) } }
        guard let doc, ctxt.pointee.wellFormed != 0, let root = tidings_xmlDocGetRootElement(doc) else {
            let e = tidings_xmlCtxtGetLastError(ctxt)
            let message = e?.pointee.message.map { String(cString: $0).trimmed(newlines: true) } ?? "not XML"
            throw ReadError("not well-formed XML: \(message)", line: e.map { Int($0.pointee.line) })
        }
        guard name(root) == "opml" else { throw ReadError("the document is <\(name(root))>, not <opml>", line: Int(tidings_xmlGetLineNo(root))) }
        guard let body = children(root).first(where: { name($0) == "body" }) else {
            throw ReadError("the document has no <body>", line: Int(tidings_xmlGetLineNo(root)))
        }
        var out: [Outline] = []
        try walk(body, folders: [], into: &out)
        return out
    }

    static func walk(_ parent: xmlNodePtr, folders: [String], into out: inout [Outline]) throws(ReadError) {
        for node in children(parent) where name(node) == "outline" {
            guard out.count < maxOutlines else { throw ReadError("more than \(maxOutlines) outlines", line: Int(tidings_xmlGetLineNo(node))) }
            let title = attr(node, "title") ?? attr(node, "text") ?? ""
            let inner = children(node).contains { name($0) == "outline" }
            let xmlURL = attr(node, "xmlUrl") ?? attr(node, "xmlurl")
            if xmlURL != nil || !inner {
                var where_ = folders
                if where_.isEmpty, let category = attr(node, "category") {
                    let first = category.split(separator: ",").first.map(String.init) ?? ""
                    where_ = first.split(separator: "/").map { String($0).trimmed(newlines: true) }.filter { !$0.isEmpty }
                }
                out.append(
                    Outline(
                        title: title, xmlURL: xmlURL, htmlURL: attr(node, "htmlUrl") ?? attr(node, "htmlurl"), folders: where_,
                        line: Int(tidings_xmlGetLineNo(node))))
            }
            if inner { try walk(node, folders: title.isEmpty ? folders : folders + [title], into: &out) }
        }
    }

    static func children(_ p: xmlNodePtr) -> [xmlNodePtr] {
        var out: [xmlNodePtr] = []
        var next = p.pointee.children
        while let n = next {
            if n.pointee.type == XML_ELEMENT_NODE { out.append(n) }
            next = n.pointee.next
        }
        return out
    }

    static func name(_ p: xmlNodePtr) -> String { p.pointee.name.map { String(cString: $0) } ?? "" }

    /// An attribute's value, trimmed; nil when absent or empty.
    static func attr(_ p: xmlNodePtr, _ name: String) -> String? {
        guard let v = tidings_xmlGetProp(p, name) else { return nil }
        defer { tidings_xml_free(v) }
        let s = String(cString: v).trimmed(newlines: true)
        return s.isEmpty ? nil : s
    }

    static func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        var i = 0
        while i <= hay.count - needle.count {
            if hay[i] == needle[0], hay[i..<i + needle.count].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    static func lineOf(_ offset: Int, in bytes: [UInt8]) -> Int {
        bytes[..<offset].reduce(1) { $1 == 10 ? $0 + 1 : $0 }
    }

    // MARK: writing

    /// One feed of an export.
    package struct Feed: Sendable, Equatable {
        package var title: String
        package var xmlURL: String
        package var htmlURL: String?
        package var group: String?

        package init(title: String, xmlURL: String, htmlURL: String? = nil, group: String? = nil) {
            self.title = title
            self.xmlURL = xmlURL
            self.htmlURL = htmlURL
            self.group = group
        }
    }

    /// OPML 2.0 that feed readers import: feeds without a group first, then one folder outline
    /// per group (in first-seen order) holding its feeds, each also with `category="/GROUP"`.
    package static func document(_ feeds: [Feed], title: String = "tidings feeds") -> String {
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<opml version=\"2.0\">\n"
        out += "  <head>\n    <title>\(escape(title))</title>\n  </head>\n  <body>\n"
        func line(_ f: Feed, indent: String) -> String {
            var s = "\(indent)<outline type=\"rss\" text=\"\(escape(f.title))\" title=\"\(escape(f.title))\" xmlUrl=\"\(escape(f.xmlURL))\""
            if let h = f.htmlURL { s += " htmlUrl=\"\(escape(h))\"" }
            if let g = f.group { s += " category=\"\(escape("/" + g))\"" }
            return s + "/>\n"
        }
        for f in feeds where f.group == nil { out += line(f, indent: "    ") }
        var groups: [String] = []
        for f in feeds { if let g = f.group, !groups.contains(g) { groups.append(g) } }
        for g in groups {
            out += "    <outline text=\"\(escape(g))\" title=\"\(escape(g))\">\n"
            for f in feeds where f.group == g { out += line(f, indent: "      ") }
            out += "    </outline>\n"
        }
        return out + "  </body>\n</opml>\n"
    }

    /// Text for an attribute value or element: markup characters as references, line breaks and
    /// tabs as character references (an attribute keeps them), other control characters left out
    /// (XML 1.0 cannot carry them).
    package static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            switch u {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            case "\t": out += "&#9;"
            default:
                if u.value < 0x20 || u.value == 0xFFFE || u.value == 0xFFFF { continue }
                out.unicodeScalars.append(u)
            }
        }
        return out
    }
}
