import CLibXML2

/// A CSS selector list over a libxml2 HTML tree (the `page` provider's `css:` selections).
///
/// Supported: type and `*`, `.class`, `#id`, attributes `[a]` `[a=v]` `[a~=v]` `[a^=v]` `[a$=v]`
/// `[a*=v]` (values quoted or bare), the descendant and child (`>`) combinators,
/// `:nth-child(An+B | odd | even)`, `:first-child`, `:last-child`, `:not(compound)` and lists
/// `a, b`. Names are matched case-insensitively (the HTML parser lower-cases them), values exactly.
package struct CSSSelector: Equatable, Sendable {
    package struct ParseError: Error, CustomStringConvertible, Equatable, Sendable {
        /// 1-based character position in the selector.
        var position: Int
        var message: String
        package var description: String { "at character \(position): \(message)" }
    }

    enum AttributeOp: String, Equatable, Sendable {
        case exists = ""
        case equals = "="
        case word = "~="
        case prefix = "^="
        case suffix = "$="
        case contains = "*="
    }

    indirect enum Simple: Equatable, Sendable {
        case type(String)  // lower-cased; "*" for any
        case id(String)
        case className(String)
        case attribute(name: String, op: AttributeOp, value: String)
        /// `:nth-child(an+b)`; `:first-child` is (0, 1).
        case nthChild(a: Int, b: Int)
        case lastChild
        case not([Simple])
    }

    enum Combinator: Equatable, Sendable { case descendant, child }

    /// One selector of a list: compounds joined by combinators (`combinators[i]` joins
    /// `compounds[i]` and `compounds[i + 1]`).
    struct Complex: Equatable, Sendable {
        var compounds: [[Simple]]
        var combinators: [Combinator]
    }

    var alternatives: [Complex]

    package init(_ text: String) throws(ParseError) {
        var p = Parser(Array(text.unicodeScalars))
        alternatives = try p.list()
    }

    // MARK: matching

    /// The elements under `root` (not `root` itself) that match, in document order; at most
    /// `limit`, visiting at most `budget` nodes, none deeper than `maxDepth` below `root`.
    /// `cut` says whether a bound stopped the walk; `shared`, the page's budget, counts every node too.
    func select(
        under root: xmlNodePtr, limit: Int = 100_000, budget: Int = 2_000_000, maxDepth: Int = 1024,
        shared: DocumentBudget? = nil, cut: inout Bool
    ) -> [xmlNodePtr] {
        var out: [xmlNodePtr] = []
        let m = Matcher(self)
        cut = HTMLTree.forEachElement(under: root, budget: budget, maxDepth: maxDepth, shared: shared) { node in
            if m.matches(node) { out.append(node) }
            return out.count < limit
        }
        return out
    }

    /// The first element under `root` that matches.
    func first(under root: xmlNodePtr, shared: DocumentBudget? = nil) -> xmlNodePtr? {
        var cut = false
        return select(under: root, limit: 1, shared: shared, cut: &cut).first
    }

    /// Matches right to left with memos: whether compound `i` of selector `s` matches a node
    /// (with everything left of it), and whether some ancestor-or-self of a node does. Each is
    /// computed once per node, so a selection costs O(nodes × compounds) however deep the
    /// tree, and climbs are loops, never recursion over depth.
    final class Matcher {
        let selector: CSSSelector
        private struct Key: Hashable {
            var s: Int
            var i: Int
            var node: UInt
        }
        private var here: [Key: Bool] = [:]
        private var above: [Key: Bool] = [:]
        private var indices: [UInt: Int] = [:]

        init(_ selector: CSSSelector) { self.selector = selector }

        func matches(_ e: xmlNodePtr) -> Bool {
            for (s, complex) in selector.alternatives.enumerated() where matches(s, complex.compounds.count - 1, e) {
                return true
            }
            return false
        }

        private func key(_ s: Int, _ i: Int, _ n: xmlNodePtr) -> Key { Key(s: s, i: i, node: UInt(bitPattern: n)) }

        private func matches(_ s: Int, _ i: Int, _ e: xmlNodePtr) -> Bool {
            let k = key(s, i, e)
            if let known = here[k] { return known }
            let complex = selector.alternatives[s]
            var result = compound(complex.compounds[i], e)
            if result && i > 0 {
                let parent = HTMLTree.parentElement(e)
                switch complex.combinators[i - 1] {
                case .child: result = parent.map { matches(s, i - 1, $0) } ?? false
                case .descendant: result = parent.map { matchesAtOrAbove(s, i - 1, $0) } ?? false
                }
            }
            here[k] = result
            return result
        }

        /// Whether `start` or one of its ancestors matches compound `i` (and what is left of it).
        private func matchesAtOrAbove(_ s: Int, _ i: Int, _ start: xmlNodePtr) -> Bool {
            var chain: [xmlNodePtr] = []
            var current: xmlNodePtr? = start
            var result = false
            while let n = current {
                if let known = above[key(s, i, n)] {
                    result = known
                    break
                }
                chain.append(n)
                if matches(s, i, n) {
                    result = true
                    break
                }
                current = HTMLTree.parentElement(n)
            }
            for n in chain { above[key(s, i, n)] = result }
            return result
        }

        private func compound(_ simples: [Simple], _ e: xmlNodePtr) -> Bool {
            simples.allSatisfy { CSSSelector.simple($0, e, index: { self.elementIndex($0) }) }
        }

        /// 1-based position among the element siblings, remembered for every sibling counted.
        func elementIndex(_ e: xmlNodePtr) -> Int {
            if let known = indices[UInt(bitPattern: e)] { return known }
            var chain: [xmlNodePtr] = [e]
            var base = 0
            var prev = e.pointee.prev
            while let p = prev {
                if p.pointee.type == XML_ELEMENT_NODE {
                    if let known = indices[UInt(bitPattern: p)] {
                        base = known
                        break
                    }
                    chain.append(p)
                }
                prev = p.pointee.prev
            }
            for (offset, n) in chain.reversed().enumerated() { indices[UInt(bitPattern: n)] = base + offset + 1 }
            return indices[UInt(bitPattern: e)]!
        }
    }

    static func simple(_ s: Simple, _ e: xmlNodePtr, index: (xmlNodePtr) -> Int) -> Bool {
        switch s {
        case .type(let name):
            return name == "*" || HTMLTree.name(e) == name
        case .id(let id):
            return HTMLTree.attribute(e, "id") == id
        case .className(let c):
            guard let v = HTMLTree.attribute(e, "class") else { return false }
            return v.split(whereSeparator: isHTMLSpace).contains { $0 == c }
        case .attribute(let name, let op, let value):
            guard let v = HTMLTree.attribute(e, name) else { return false }
            switch op {
            case .exists: return true
            case .equals: return v == value
            case .word: return !value.isEmpty && v.split(whereSeparator: isHTMLSpace).contains { $0 == value }
            case .prefix: return !value.isEmpty && v.hasPrefix(value)
            case .suffix: return !value.isEmpty && v.hasSuffix(value)
            case .contains: return !value.isEmpty && v.contains(value)
            }
        case .nthChild(let a, let b):
            let i = index(e)
            if a == 0 { return i == b }
            let d = i - b
            return d % a == 0 && d / a >= 0
        case .lastChild:
            return HTMLTree.isLastElement(e)
        case .not(let inner):
            return !inner.allSatisfy { simple($0, e, index: index) }
        }
    }

    static func isHTMLSpace(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\u{0C}" }

    // MARK: parsing

    private struct Parser {
        let s: [Unicode.Scalar]
        var i = 0
        init(_ s: [Unicode.Scalar]) { self.s = s }

        var atEnd: Bool { i >= s.count }
        func peek() -> Unicode.Scalar? { i < s.count ? s[i] : nil }

        func fail(_ message: String, at position: Int? = nil) -> ParseError {
            ParseError(position: (position ?? i) + 1, message: message)
        }

        func describeHere() -> String {
            guard let c = peek() else { return "the end" }
            return "'\(Character(c))'"
        }

        static func isSpace(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\u{0C}" }
        static func isNameStart(_ c: Unicode.Scalar) -> Bool {
            (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_" || c.value >= 0x80
        }
        static func isName(_ c: Unicode.Scalar) -> Bool { isNameStart(c) || (c >= "0" && c <= "9") || c == "-" }

        mutating func skipSpace() -> Bool {
            let start = i
            while let c = peek(), Self.isSpace(c) { i += 1 }
            return i > start
        }

        mutating func list() throws(ParseError) -> [Complex] {
            var out: [Complex] = []
            _ = skipSpace()
            if atEnd { throw fail("empty selector") }
            while true {
                out.append(try complex())
                _ = skipSpace()
                if atEnd { return out }
                guard peek() == "," else { throw fail("unexpected \(describeHere())") }
                i += 1
                _ = skipSpace()
                if atEnd || peek() == "," { throw fail("a selector is missing after ','") }
            }
        }

        mutating func complex() throws(ParseError) -> Complex {
            var c = Complex(compounds: [try compound()], combinators: [])
            while true {
                let spaced = skipSpace()
                guard let next = peek(), next != "," else { return c }
                if next == ">" {
                    i += 1
                    _ = skipSpace()
                    if atEnd { throw fail("a selector is missing after '>'") }
                    c.combinators.append(.child)
                } else if next == "+" || next == "~" {
                    throw fail("the combinator '\(Character(next))' is not supported (only descendant ' ' and child '>')")
                } else if spaced {
                    c.combinators.append(.descendant)
                } else {
                    throw fail("unexpected \(describeHere())")
                }
                c.compounds.append(try compound())
            }
        }

        /// A type or `*` (optional) and then class, id, attribute and pseudo-class selectors.
        mutating func compound(inNot: Bool = false) throws(ParseError) -> [Simple] {
            var out: [Simple] = []
            let start = i
            if peek() == "*" {
                i += 1
                out.append(.type("*"))
            } else if let c = peek(), Self.isNameStart(c) {
                out.append(.type(name().lowercased()))
            }
            loop: while let c = peek() {
                switch c {
                case ".":
                    i += 1
                    out.append(.className(try identifier(after: "'.'")))
                case "#":
                    i += 1
                    out.append(.id(try identifier(after: "'#'")))
                case "[":
                    out.append(try attribute())
                case ":":
                    out.append(try pseudo(inNot: inNot))
                default:
                    break loop
                }
            }
            if out.isEmpty || i == start {
                throw fail(atEnd ? "a selector is missing at the end" : "expected a type, '*', '.', '#', '[' or ':', found \(describeHere())")
            }
            return out
        }

        mutating func name() -> String {
            var out = ""
            while let c = peek(), Self.isName(c) {
                out.unicodeScalars.append(c)
                i += 1
            }
            return out
        }

        /// A name, with CSS escapes (`\:` and the like) for the odd id or class.
        mutating func identifier(after what: String) throws(ParseError) -> String {
            var out = ""
            while let c = peek() {
                if Self.isName(c) {
                    out.unicodeScalars.append(c)
                    i += 1
                } else if c == "\\", i + 1 < s.count {
                    out.unicodeScalars.append(s[i + 1])
                    i += 2
                } else {
                    break
                }
            }
            if out.isEmpty { throw fail("a name is missing after \(what)") }
            return out
        }

        mutating func attribute() throws(ParseError) -> Simple {
            let open = i
            i += 1  // [
            _ = skipSpace()
            let n = name().lowercased()
            if n.isEmpty { throw fail("an attribute name is missing after '['") }
            _ = skipSpace()
            guard let c = peek() else { throw fail("'[' at character \(open + 1) is not closed") }
            if c == "]" {
                i += 1
                return .attribute(name: n, op: .exists, value: "")
            }
            let op: AttributeOp
            if c == "=" {
                op = .equals
                i += 1
            } else if i + 1 < s.count, s[i + 1] == "=", let o = AttributeOp(rawValue: String(Character(c)) + "=") {
                op = o
                i += 2
            } else {
                throw fail("expected ']' or one of = ~= ^= $= *=, found \(describeHere())")
            }
            _ = skipSpace()
            var value = ""
            if let q = peek(), q == "\"" || q == "'" {
                let quoteAt = i
                i += 1
                while true {
                    guard let ch = peek() else { throw fail("the quote at character \(quoteAt + 1) is not closed") }
                    i += 1
                    if ch == q { break }
                    if ch == "\\", let e = peek() {
                        value.unicodeScalars.append(e)
                        i += 1
                    } else {
                        value.unicodeScalars.append(ch)
                    }
                }
            } else {
                value = name()
                if value.isEmpty { throw fail("an attribute value is missing (quote it if it is not a plain name)") }
            }
            _ = skipSpace()
            if let ci = peek(), ci == "i" || ci == "s" { throw fail("attribute flags ('i', 's') are not supported") }
            guard peek() == "]" else {
                throw fail(atEnd ? "'[' at character \(open + 1) is not closed" : "expected ']', found \(describeHere())")
            }
            i += 1
            return .attribute(name: n, op: op, value: value)
        }

        mutating func pseudo(inNot: Bool) throws(ParseError) -> Simple {
            let at = i
            i += 1  // :
            if peek() == ":" { throw fail("pseudo-elements ('::') are not supported", at: at) }
            let n = name().lowercased()
            switch n {
            case "first-child": return .nthChild(a: 0, b: 1)
            case "last-child": return .lastChild
            case "nth-child":
                guard peek() == "(" else { throw fail("':nth-child' needs an argument, as in :nth-child(2n+1)") }
                i += 1
                let argStart = i
                while let c = peek(), c != ")" { i += 1 }
                guard peek() == ")" else { throw fail("':nth-child(' is not closed", at: argStart - 1) }
                let arg = String(String.UnicodeScalarView(s[argStart..<i]))
                i += 1
                guard let ab = Self.nth(arg) else {
                    throw fail("':nth-child(\(arg))': expected An+B, odd or even", at: argStart)
                }
                return .nthChild(a: ab.0, b: ab.1)
            case "not":
                if inNot { throw fail("':not' cannot be nested", at: at) }
                guard peek() == "(" else { throw fail("':not' needs an argument, as in :not(.hidden)") }
                i += 1
                _ = skipSpace()
                let inner = try compound(inNot: true)
                _ = skipSpace()
                guard peek() == ")" else {
                    throw fail(atEnd ? "':not(' is not closed" : "':not' takes one compound selector (no combinators or lists), found \(describeHere())")
                }
                i += 1
                return .not(inner)
            case "":
                throw fail("a pseudo-class name is missing after ':'", at: at)
            default:
                throw fail("the pseudo-class ':\(n)' is not supported (only :nth-child, :first-child, :last-child, :not)", at: at)
            }
        }

        /// `An+B`, `odd`, `even`, `-n+3`, `5`: (a, b).
        static func nth(_ raw: String) -> (Int, Int)? {
            let t = raw.filter { !$0.isWhitespace }.lowercased()
            if t == "odd" { return (2, 1) }
            if t == "even" { return (2, 0) }
            guard let n = t.firstIndex(of: "n") else { return Int(t).map { (0, $0) } }
            let aPart = String(t[..<n])
            let bPart = String(t[t.index(after: n)...])
            let a: Int
            switch aPart {
            case "", "+": a = 1
            case "-": a = -1
            default:
                guard let v = Int(aPart) else { return nil }
                a = v
            }
            if bPart.isEmpty { return (a, 0) }
            guard let sign = bPart.first, sign == "+" || sign == "-", let v = Int(bPart.dropFirst()), !bPart.dropFirst().hasPrefix("+"),
                !bPart.dropFirst().hasPrefix("-")
            else { return nil }
            guard abs(a) <= 1_000_000, v <= 1_000_000 else { return nil }
            return (a, sign == "-" ? -v : v)
        }
    }
}
