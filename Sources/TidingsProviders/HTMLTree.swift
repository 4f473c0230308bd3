import CLibXML2
import Foundation

/// Reading a libxml2 HTML tree: element names and attributes, and walks that are iterative (no
/// recursion, whatever the nesting) and bounded in nodes and depth.
enum HTMLTree {
    static func name(_ e: xmlNodePtr) -> String {
        e.pointee.name.map { String(cString: $0).lowercased() } ?? ""
    }

    /// An attribute's value (names compared case-insensitively; the HTML parser lower-cases them).
    static func attribute(_ e: xmlNodePtr, _ name: String) -> String? {
        var next = e.pointee.properties
        while let a = next {
            if let n = a.pointee.name, String(cString: n).lowercased() == name {
                var out = ""
                var child = a.pointee.children
                while let c = child {
                    if let t = c.pointee.content { out += String(cString: t) }
                    child = c.pointee.next
                }
                return out
            }
            next = a.pointee.next
        }
        return nil
    }

    static func parentElement(_ e: xmlNodePtr) -> xmlNodePtr? {
        guard let p = e.pointee.parent, p.pointee.type == XML_ELEMENT_NODE else { return nil }
        return p
    }

    static func isLastElement(_ e: xmlNodePtr) -> Bool {
        var next = e.pointee.next
        while let n = next {
            if n.pointee.type == XML_ELEMENT_NODE { return false }
            next = n.pointee.next
        }
        return true
    }

    /// Visits the elements under `root` (not `root`) in document order, `visit` returning false
    /// to stop. Nodes past `budget`, or deeper than `maxDepth` below `root`, are not visited.
    /// Returns whether the walk was cut by either bound.
    @discardableResult
    static func forEachElement(under root: xmlNodePtr, budget: Int, maxDepth: Int, _ visit: (xmlNodePtr) -> Bool) -> Bool {
        var cut = false
        walk(root, includeRoot: false, budget: budget, maxDepth: maxDepth, cut: &cut, enter: { n in
            guard n.pointee.type == XML_ELEMENT_NODE else { return .skipChildren }
            return visit(n) ? .descend : .stop
        }, leave: { _ in })
        return cut
    }

    enum Step { case descend, skipChildren, stop }

    /// A preorder walk with `leave` after a node's children (for every node `enter` saw unless
    /// it said stop). Iterative: libxml2's parent and sibling links, no stack of our own.
    static func walk(_ root: xmlNodePtr, includeRoot: Bool, budget: Int, maxDepth: Int, cut: inout Bool,
                     enter: (xmlNodePtr) -> Step, leave: (xmlNodePtr) -> Void) {
        var visits = 0
        var depth: Int
        var current: xmlNodePtr?
        if includeRoot {
            current = root
            depth = 0
        } else {
            current = root.pointee.children
            depth = 1
        }
        while let n = current {
            visits += 1
            if visits > budget {
                cut = true
                return
            }
            let step = enter(n)
            if step == .stop { return }
            if step == .descend, let child = n.pointee.children {
                if depth < maxDepth {
                    current = child
                    depth += 1
                    continue
                }
                cut = true
            }
            // Done with n: leave it, then its ancestors as long as they have no next sibling.
            var done: xmlNodePtr = n
            while true {
                leave(done)
                if done == root { return }
                if let sibling = done.pointee.next {
                    current = sibling
                    break
                }
                guard let parent = done.pointee.parent else { return }
                depth -= 1
                if parent == root && !includeRoot { return }
                done = parent
            }
        }
    }
}

/// The text of a selection as a browser shows it: block elements on their own lines, `br` a
/// line break, whitespace collapsed (kept in `pre`), `script`/`style`/`template`/`noscript`/`head`
/// dropped, entities decoded (by the parser), control characters (terminal escapes) removed.
struct RenderedText {
    static let blockElements: Set<String> = [
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "dir",
        "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "frameset", "h1", "h2", "h3", "h4",
        "h5", "h6", "header", "hgroup", "hr", "html", "legend", "li", "main", "menu", "nav", "ol", "option", "p", "pre",
        "section", "summary", "table", "tbody", "tfoot", "thead", "tr", "ul",
    ]
    static let skipped: Set<String> = ["script", "style", "template", "noscript", "head", "title", "iframe", "object", "svg", "math"]
    static let cells: Set<String> = ["td", "th"]

    /// Collected text beyond this many bytes is cut.
    static let maxBytes = 1 << 20
    /// Nodes visited per rendering, and the depth below the rendered node.
    static let maxVisits = 2_000_000
    static let maxDepth = 1024

    private(set) var raw = ""
    private var bytes = 0
    private var pre = 0
    /// The text was cut: too long, too many nodes or too deep.
    private(set) var cut = false

    /// Renders `node` (an element, the document, a text or an attribute node) and appends it.
    mutating func render(_ node: xmlNodePtr) {
        var walkCut = false
        HTMLTree.walk(node, includeRoot: true, budget: Self.maxVisits, maxDepth: Self.maxDepth, cut: &walkCut, enter: { n in
            if bytes >= Self.maxBytes {
                cut = true
                return .stop
            }
            switch n.pointee.type {
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if let t = n.pointee.content { text(String(cString: t)) }
                return .skipChildren
            case XML_ATTRIBUTE_NODE:
                return .descend
            case XML_ELEMENT_NODE:
                let name = HTMLTree.name(n)
                if Self.skipped.contains(name) { return .skipChildren }
                if name == "br" { append("\n") }
                if Self.blockElements.contains(name) { append("\n") }
                if Self.cells.contains(name) { append(" ") }
                if name == "pre" { pre += 1 }
                return .descend
            case XML_DOCUMENT_NODE, XML_HTML_DOCUMENT_NODE, XML_DOCUMENT_FRAG_NODE:
                return .descend
            default:
                return .skipChildren  // comments, processing instructions, DTDs
            }
        }, leave: { n in
            guard n.pointee.type == XML_ELEMENT_NODE else { return }
            let name = HTMLTree.name(n)
            if Self.blockElements.contains(name) { append("\n") }
            if Self.cells.contains(name) { append(" ") }
            if name == "pre" { pre -= 1 }
        })
        if walkCut { cut = true }
        append("\n")
    }

    /// A plain string as the text of a selection (an XPath string result, a text document).
    mutating func plain(_ s: String) {
        let room = Self.maxBytes - bytes
        if s.utf8.count > room {
            cut = true
            append(String(decoding: s.utf8.prefix(max(room, 0)), as: UTF8.self))
        } else {
            append(s)
        }
        append("\n")
    }

    private mutating func text(_ s: String) {
        if pre > 0 {
            append(s)
        } else {
            // Source line breaks and tabs are spaces in HTML; runs collapse in `lines`.
            append(String(s.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" || $0 == "\t" ? " " : $0 }))
        }
    }

    private mutating func append(_ s: String) {
        raw += s
        bytes += s.utf8.count
    }

    /// The rendered lines: each one's whitespace collapsed (no-break spaces too), control
    /// characters removed, blank lines dropped.
    var lines: [String] { Self.lines(raw) }

    static func lines(_ text: String) -> [String] {
        text.split(omittingEmptySubsequences: true, whereSeparator: { $0.isNewline }).compactMap { sub -> String? in
            let clean = String(String.UnicodeScalarView(sub.unicodeScalars.filter { !isControl($0) }))
            let line = clean.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
            return line.isEmpty ? nil : line
        }
    }

    /// C0 and C1 controls (ESC of terminal sequences among them), DEL, and the bidirectional
    /// overrides that can reorder what a terminal shows. Tabs count as whitespace.
    static func isControl(_ c: Unicode.Scalar) -> Bool {
        let v = c.value
        if v == 0x09 { return false }
        return v < 0x20 || (v >= 0x7F && v <= 0x9F) || (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069)
    }
}
