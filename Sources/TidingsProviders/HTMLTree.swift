import CLibXML2
import FoundationEssentials
import Glibc

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
    /// `shared`: the page's budget, which every node visited counts against too.
    @discardableResult
    static func forEachElement(
        under root: xmlNodePtr, budget: Int, maxDepth: Int, shared: DocumentBudget? = nil, _ visit: (xmlNodePtr) -> Bool
    ) -> Bool {
        var cut = false
        walk(
            root, includeRoot: false, budget: budget, maxDepth: maxDepth, shared: shared, cut: &cut,
            enter: { n in
                guard n.pointee.type == XML_ELEMENT_NODE else { return .skipChildren }
                return visit(n) ? .descend : .stop
            }, leave: { _ in })
        return cut
    }

    enum Step { case descend, skipChildren, stop }

    /// A preorder walk with `leave` after a node's children (for every node `enter` saw unless
    /// it said stop). Iterative: libxml2's parent and sibling links, no stack of our own.
    /// Stops (as cut) past `budget` nodes, or once `shared` (the page's budget) is spent.
    static func walk(
        _ root: xmlNodePtr, includeRoot: Bool, budget: Int, maxDepth: Int, shared: DocumentBudget? = nil, cut: inout Bool,
        enter: (xmlNodePtr) -> Step, leave: (xmlNodePtr) -> Void
    ) {
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
            if visits > budget || shared?.visit() == false {
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

    /// The text so far, UTF-8 (bytes, not Characters: a page's text is megabytes at most,
    /// and byte loops keep rendering fast in debug builds too).
    private(set) var raw: [UInt8] = []
    private var pre = 0
    /// The text was cut: too long, too many nodes or too deep.
    private(set) var cut = false
    /// The page's: what every rendering on it may cost in all.
    let budget: DocumentBudget?

    init(budget: DocumentBudget? = nil) { self.budget = budget }

    /// Renders `node` (an element, the document, a text or an attribute node) and appends it.
    mutating func render(_ node: xmlNodePtr) {
        var walkCut = false
        let start = raw.count
        defer { budget?.add(bytes: raw.count - start) }
        HTMLTree.walk(
            node, includeRoot: true, budget: Self.maxVisits, maxDepth: Self.maxDepth, shared: budget, cut: &walkCut,
            enter: { n in
                if raw.count >= Self.maxBytes {
                    cut = true
                    return .stop
                }
                switch n.pointee.type {
                case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                    if let t = n.pointee.content { text(t) }
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
            },
            leave: { n in
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
        let room = max(Self.maxBytes - raw.count, 0)
        if s.utf8.count > room { cut = true }
        raw.append(contentsOf: s.utf8.prefix(room))
        budget?.add(bytes: min(s.utf8.count, room))
        append("\n")
    }

    /// A text node's bytes; outside `pre`, source line breaks and tabs are spaces (runs collapse in `lines`).
    private mutating func text(_ t: UnsafePointer<xmlChar>) {
        let start = raw.count
        raw.append(contentsOf: UnsafeBufferPointer(start: t, count: strlen(UnsafeRawPointer(t).assumingMemoryBound(to: CChar.self))))
        guard pre == 0 else { return }
        for i in start..<raw.count where raw[i] == 0x0A || raw[i] == 0x0D || raw[i] == 0x09 { raw[i] = 0x20 }
    }

    private mutating func append(_ s: StaticString) {
        raw.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// The rendered lines: each one's whitespace collapsed (no-break and other Unicode spaces
    /// too), control characters removed, blank lines dropped.
    var lines: [String] { Self.lines(raw) }

    static func lines(_ text: String) -> [String] { lines(Array(text.utf8)) }

    static func lines(_ bytes: [UInt8]) -> [String] {
        var out: [String] = []
        var line: [UInt8] = []
        var space = false
        func flush() {
            if !line.isEmpty { out.append(String(decoding: line, as: UTF8.self)) }
            line.removeAll(keepingCapacity: true)
            space = false
        }
        let n = bytes.count
        var i = 0
        while i < n {
            let b = bytes[i]
            if b == 0x0A {
                flush()
                i += 1
                continue
            }
            let (length, isSpace, keep) = Self.classify(bytes, i)
            if isSpace {
                space = !line.isEmpty
            } else if keep {
                if space { line.append(0x20) }
                space = false
                line.append(contentsOf: bytes[i..<(i + length)])
            }
            i += length
        }
        flush()
        return out
    }

    /// What starts at `i`: its length in bytes, whether it is whitespace, whether it is kept
    /// (not a control character: C0, DEL, C1, the bidirectional overrides and isolates).
    static func classify(_ b: [UInt8], _ i: Int) -> (Int, Bool, Bool) {
        let c = b[i]
        func at(_ k: Int) -> UInt8 { i + k < b.count ? b[i + k] : 0 }
        switch c {
        case 0x20, 0x09, 0x0B, 0x0C, 0x0D: return (1, true, false)
        case 0..<0x20, 0x7F: return (1, false, false)
        case 0xC2:
            let d = at(1)
            if d >= 0x80 && d <= 0x9F { return (2, false, false) }  // C1 (NEL among them)
            if d == 0xA0 { return (2, true, false) }  // no-break space
            return (min(2, b.count - i), false, true)
        case 0xE2:
            let d = at(1)
            let e = at(2)
            if d == 0x80 && ((e >= 0x80 && e <= 0x8A) || e == 0xA8 || e == 0xA9 || e == 0xAF) { return (3, true, false) }
            if d == 0x80 && e >= 0xAA && e <= 0xAE { return (3, false, false) }  // LRE…RLO
            if d == 0x81 && e == 0x9F { return (3, true, false) }
            if d == 0x81 && e >= 0xA6 && e <= 0xA9 { return (3, false, false) }  // LRI…PDI
            return (min(3, b.count - i), false, true)
        case 0xE1 where at(1) == 0x9A && at(2) == 0x80, 0xE3 where at(1) == 0x80 && at(2) == 0x80:
            return (3, true, false)
        default:
            let length = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1
            return (min(length, b.count - i), false, true)
        }
    }
}
