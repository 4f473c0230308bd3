/// The Mustache renderer of tidings' templates (sinks' message templates, the status page),
/// on the standard library alone (DESIGN §15: no corelibs Foundation).
///
/// It does what the templates and docs/sinks.md use, with the output swift-mustache gives (the
/// tests render every shipped template and hostile inputs with both and compare): `{{x}}`,
/// dotted names, `{{{x}}}` / `{{&x}}`, sections over lists, objects and booleans, inverted
/// sections, comments, partials (from a ``TemplateLibrary``), `{{.}}`, set-delimiters, the
/// `CONTENT_TYPE` pragma, transforms (`{{uppercased(title)}}`, `{{#first()}}`), inheritance
/// tags parsed (a block renders its default), and the spec's standalone-line rules.

/// A value a template reads. Objects and lists are read lazily through closures, so a large
/// context costs only what the template walks.
public enum TemplateValue {
    /// Found (a lookup stops here), but renders empty and is false in a section.
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case text(String)
    case list(TemplateList)
    case object(TemplateObject)
    /// `first`, `last`, `index`, `even`, `odd` of the current repetition (`{{#first()}}`).
    case sequence(first: Bool, last: Bool, index: Int)
}

/// An array: its elements, and how it renders itself (`{{{list}}}`).
public struct TemplateList {
    public let count: Int
    public let element: (Int) -> TemplateValue
    public let text: () -> String
    /// The list in reverse (`reversed(list)`), when it renders itself differently than by default.
    public let reversed: (() -> TemplateList)?
    public init(count: Int, element: @escaping (Int) -> TemplateValue, text: @escaping () -> String, reversed: (() -> TemplateList)? = nil) {
        self.count = count
        self.element = element
        self.text = text
        self.reversed = reversed
    }
}

/// An object: its members by name, its names, and how it renders itself.
public struct TemplateObject {
    public let child: (String) -> TemplateValue?
    public let keys: () -> [String]
    public let text: () -> String
    /// The members as `{key, value}` objects in key order (`sorted(object)`), when they render
    /// themselves differently than by default.
    public let entries: (() -> TemplateList)?
    public init(
        child: @escaping (String) -> TemplateValue?, keys: @escaping () -> [String],
        text: @escaping () -> String, entries: (() -> TemplateList)? = nil
    ) {
        self.child = child
        self.keys = keys
        self.text = text
        self.entries = entries
    }
}

/// How `{{x}}` escapes what it inserts.
public typealias TemplateEscape = @Sendable (String) -> String

/// What one rendering may still write, shared by all its parts: once spent, values render
/// empty and sections stop repeating, so no context can make a rendering long.
public final class TemplateBudget {
    public private(set) var remaining: Int
    /// What one repetition of a section costs (about the template's own length).
    public let perRepetition: Int
    public init(bytes: Int, perRepetition: Int) {
        remaining = bytes
        self.perRepetition = perRepetition
    }
    public var isSpent: Bool { remaining <= 0 }
    func take(_ text: String) -> String {
        guard !isSpent else { return "" }
        remaining -= text.utf8.count
        return text
    }
    func repeatSection() -> Bool {
        guard !isSpent else { return false }
        remaining -= perRepetition
        return true
    }
}

/// Named templates for `{{> name}}`.
public struct TemplateLibrary: Sendable {
    private var templates: [String: Template] = [:]
    public init() {}
    public mutating func register(_ template: Template, named name: String) { templates[name] = template }
    public func template(named name: String) -> Template? { templates[name] }

    /// `name` rendered with `context`, HTML-escaped; nil when there is no such template.
    public func render(_ context: TemplateValue, withTemplate name: String) -> String? {
        guard let t = templates[name] else { return nil }
        return t.render(context, escape: Template.htmlEscape, library: self, emptyTextIsFalse: false)
    }
}

public struct Template: Sendable {
    indirect enum Token: Sendable {
        case text(String)
        case variable(String, [String], escaped: Bool)
        case section(String, [String], Template)
        case inverted(String, [String], Template)
        case partial(String, indentation: String?, dynamic: Bool)
        case block(Template, indentation: String)
        case contentType(String)
    }

    let tokens: [Token]

    /// Why a template does not parse, and where (1-based line and column of the template).
    public struct ParseError: Error, Sendable, Equatable {
        public enum Kind: Error, Sendable, Equatable {
            case sectionCloseNameIncorrect, unfinishedName, expectedSectionEnd, invalidSetDelimiter
            case illegalTokenInsideInheritSection, transformAppliedToInheritanceSection
            case invalidConfigVariableSyntax, unrecognisedConfigVariable, unexpectedEnd
        }
        public var kind: Kind
        public var line: Int
        public var column: Int
    }

    /// Parses `source`; `contentTypes` are the names `{{% CONTENT_TYPE: name}}` may switch to.
    /// With `firstLineStandalone` false the text renders as if a standalone tag stood in front of
    /// it (the pragma that set the sinks' escaping before): a blank first line is dropped, and
    /// tags on a first line with text are not standalone.
    public init(_ source: String, contentTypes: [String: TemplateEscape] = [:], firstLineStandalone: Bool = true) throws(ParseError) {
        var p = Parser(chars: Array(source), contentTypes: contentTypes)
        var state = State()
        // Without, a blank first line goes (as after a standalone tag), and line 1's tags are not standalone.
        if !firstLineStandalone { state.newLine = p.lineFinished() }
        do {
            self = try p.parse(state)
        } catch {
            throw p.error(error)
        }
    }

    init(tokens: [Token]) { self.tokens = tokens }

    /// The text for `context`: `{{x}}` through `escape`, partials from `library`, within `budget`.
    public func render(
        _ context: TemplateValue, escape: @escaping TemplateEscape, library: TemplateLibrary? = nil,
        budget: TemplateBudget? = nil, contentTypes: [String: TemplateEscape] = [:], maxDepth: Int = 200,
        emptyTextIsFalse: Bool = true
    ) -> String {
        var r = Renderer(library: library, budget: budget, contentTypes: contentTypes, maxDepth: maxDepth, emptyTextIsFalse: emptyTextIsFalse)
        return r.render(self, Context(stack: [context], sequence: nil, indentation: nil, escape: escape), depth: 0)
    }

    /// `& < > " '` as entities (the status page, Mustache's default).
    public static let htmlEscape: TemplateEscape = { text in
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }
}

// MARK: - Parsing

private let nameChars = Set<Character>("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_?()*")
private let plainNameChars = Set<Character>("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_?*")
private let partialNameChars = Set<Character>("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-_?()*/")

private struct State {
    /// The state inside section `name` opened on a standalone line or not.
    func inside(_ name: String, _ transforms: [String] = [], standalone: Bool) -> State {
        var s = self
        s.section = name
        s.sectionTransforms = transforms
        s.inheritTop = false
        if !standalone { s.newLine = false }
        return s
    }

    var section: String? = nil
    var sectionTransforms: [String] = []
    var newLine = true
    var inheritTop = false
    var start: [Character] = ["{", "{"]
    var end: [Character] = ["}", "}"]
}

private struct Parser {
    let chars: [Character]
    let contentTypes: [String: TemplateEscape]
    var pos = 0

    init(chars: [Character], contentTypes: [String: TemplateEscape]) {
        self.chars = chars
        self.contentTypes = contentTypes
    }

    var atEnd: Bool { pos >= chars.count }
    var current: Character { pos < chars.count ? chars[pos] : "\0" }

    @discardableResult
    mutating func skip(while f: (Character) -> Bool) -> String {
        let s = pos
        while pos < chars.count, f(chars[pos]) { pos += 1 }
        return String(chars[s..<pos])
    }

    /// Consumes `s` when it comes next.
    mutating func take(_ s: [Character]) -> Bool {
        guard pos + s.count <= chars.count, Array(chars[pos..<pos + s.count]) == s else { return false }
        pos += s.count
        return true
    }

    /// Up to (not including) the first character satisfying `f`; throws at the end.
    mutating func read(until f: (Character) -> Bool) throws(Template.ParseError.Kind) -> String {
        let s = pos
        while pos < chars.count {
            if f(chars[pos]) { return String(chars[s..<pos]) }
            pos += 1
        }
        throw .unexpectedEnd
    }

    func error(_ kind: Template.ParseError.Kind) -> Template.ParseError {
        var column = 0
        var i = min(pos, chars.count)
        while i > 0 {
            i -= 1
            if chars[i] == "\n" { break }
            column += 1
        }
        let line = chars[0..<min(pos, chars.count)].reduce(0) { $0 + ($1.isNewline ? 1 : 0) } + 1
        return Template.ParseError(kind: kind, line: line, column: column + 1)
    }

    /// The rest of the line is blank: consume it and its line break.
    mutating func lineFinished() -> Bool {
        if atEnd { return true }
        var q = pos
        while q < chars.count, chars[q] == " " || chars[q] == "\t" { q += 1 }
        if q < chars.count, chars[q].isNewline {
            pos = q + 1
            return true
        }
        return false
    }

    mutating func standalone(_ state: State) -> Bool { state.newLine && lineFinished() }

    mutating func textUntilTagOrNewline(_ state: State) -> String {
        var text = ""
        guard let first = state.start.first else { return "" }
        while !atEnd {
            let s = pos
            while pos < chars.count, chars[pos] != "\n", chars[pos] != "\r\n", chars[pos] != first { pos += 1 }
            text += String(chars[s..<pos])
            if current.isNewline { break }
            if current == first {
                if take(state.start) { break }
                text.append(first)
                pos += 1
            }
        }
        return text
    }

    mutating func name(_ state: State) throws(Template.ParseError.Kind) -> (String, [String]) {
        skip(while: \.isWhitespace)
        let text = skip(while: { nameChars.contains($0) })
        skip(while: \.isWhitespace)
        guard take(state.end) else { throw .unfinishedName }
        // `f(g(x))`: transforms f, g applied to x (innermost first).
        let t = Array(text)
        var i = 0
        func word() -> String {
            let s = i
            while i < t.count, plainNameChars.contains(t[i]) { i += 1 }
            return String(t[s..<i])
        }
        let head = word()
        if i == t.count { return (text, []) }
        guard t[i] == "(" else { throw .unfinishedName }
        i += 1
        var transforms = [head]
        while true {
            let n = word()
            guard i < t.count else { throw .unfinishedName }
            if t[i] == ")" {
                i += 1
                var closing = 0
                while i < t.count, t[i] == ")" {
                    closing += 1
                    i += 1
                }
                guard closing + 1 == transforms.count, i == t.count else { throw .unfinishedName }
                return (n, transforms)
            } else if t[i] == "(" {
                i += 1
                transforms.append(n)
            } else {
                throw .unfinishedName
            }
        }
    }

    mutating func partialName(_ state: State) throws(Template.ParseError.Kind) -> String {
        skip(while: \.isWhitespace)
        let text = skip(while: { partialNameChars.contains($0) })
        skip(while: \.isWhitespace)
        guard take(state.end) else { throw .unfinishedName }
        return text
    }

    mutating func parse(_ initial: State) throws(Template.ParseError.Kind) -> Template {
        var tokens: [Template.Token] = []
        var state = initial
        var ws = ""
        func flushWhitespace() {
            if !ws.isEmpty {
                tokens.append(.text(ws))
                ws = ""
            }
        }
        while !atEnd {
            if state.newLine { ws = skip(while: { $0 == " " || $0 == "\t" }) }
            let text = textUntilTagOrNewline(state)
            if current.isNewline {
                tokens.append(.text(ws + text + String(current)))
                state.newLine = true
                pos += 1
                continue
            }
            if !text.isEmpty {
                tokens.append(.text(ws + text))
                ws = ""
                state.newLine = false
            }
            if atEnd { break }
            var setNewLine = false
            switch current {
            case "#", "^":
                let inverted = current == "^"
                pos += 1
                let (n, transforms) = try name(state)
                if standalone(state) { setNewLine = true } else { flushWhitespace() }
                let body = try parse(state.inside(n, transforms, standalone: setNewLine))
                tokens.append(inverted ? .inverted(n, transforms, body) : .section(n, transforms, body))
            case "/":
                pos += 1
                let at = pos
                let (n, transforms) = try name(state)
                guard n == state.section, transforms == state.sectionTransforms else {
                    pos = at
                    throw .sectionCloseNameIncorrect
                }
                if !standalone(state) { flushWhitespace() }
                return Template(tokens: tokens)
            case "!":
                pos += 1
                guard let close = findClose(state.end) else {
                    pos = chars.count
                    throw .unexpectedEnd
                }
                pos = close + state.end.count
                setNewLine = standalone(state)
            case "{", "&":
                let triple = current == "{"
                flushWhitespace()
                pos += 1
                let (n, transforms) = try name(state)
                if triple {
                    guard !atEnd else { throw .unexpectedEnd }
                    guard take(["}"]) else { throw .unfinishedName }
                }
                tokens.append(.variable(n, transforms, escaped: false))
            case ">":
                pos += 1
                skip(while: \.isWhitespace)
                var dynamic = false
                if current == "*" {
                    pos += 1
                    dynamic = true
                }
                let n = try partialName(state)
                if !ws.isEmpty { tokens.append(.text(ws)) }
                if standalone(state) {
                    setNewLine = true
                    tokens.append(.partial(n, indentation: ws, dynamic: dynamic))
                } else {
                    tokens.append(.partial(n, indentation: nil, dynamic: dynamic))
                }
                ws = ""
            case "<":
                pos += 1
                skip(while: \.isWhitespace)
                let sectionName = try partialName(state)
                var n = sectionName
                let dynamic = n.first == "*"
                if dynamic { n.removeFirst() }
                if !ws.isEmpty { tokens.append(.text(ws)) }
                if standalone(state) { setNewLine = true }
                var inner = state
                inner.section = sectionName
                inner.sectionTransforms = []
                inner.newLine = true
                inner.inheritTop = true
                let body = try parse(inner)
                for t in body.tokens {
                    switch t {
                    case .text: break
                    default: throw .illegalTokenInsideInheritSection
                    }
                }
                // No overrides are applied: there is no library of parents in the templates here.
                tokens.append(.partial(n, indentation: ws, dynamic: dynamic))
                ws = ""
            case "$":
                pos += 1
                let (n, transforms) = try name(state)
                guard transforms.isEmpty else { throw .transformAppliedToInheritanceSection }
                if state.inheritTop {
                    if standalone(state) { setNewLine = true }
                    _ = try parse(state.inside(n, standalone: setNewLine))
                    tokens.append(.text(""))
                } else {
                    if !ws.isEmpty { tokens.append(.text(ws)) }
                    if standalone(state) { setNewLine = true }
                    let body = try parse(state.inside(n, standalone: setNewLine))
                    tokens.append(.block(body, indentation: ws))
                    ws = ""
                }
            case "=":
                pos += 1
                let start: String
                let end: String
                do {
                    skip(while: \.isWhitespace)
                    start = try read(until: \.isWhitespace)
                    skip(while: \.isWhitespace)
                    end = try read(until: { $0 == "=" || $0.isWhitespace })
                    skip(while: \.isWhitespace)
                } catch {
                    throw .invalidSetDelimiter
                }
                guard !atEnd else { throw .unexpectedEnd }
                guard take(["="]) else { throw .invalidSetDelimiter }
                guard take(state.end) else { throw .invalidSetDelimiter }
                guard !start.isEmpty, !end.isEmpty else { throw .invalidSetDelimiter }
                state.start = Array(start)
                state.end = Array(end)
                state.inheritTop = false
                setNewLine = standalone(state)
            case "%":
                pos += 1
                skip(while: \.isWhitespace)
                let variable = skip(while: { plainNameChars.contains($0) })
                skip(while: \.isWhitespace)
                guard !atEnd else { throw .invalidConfigVariableSyntax }
                guard take([":"]) else { throw .invalidConfigVariableSyntax }
                skip(while: \.isWhitespace)
                let value = skip(while: { plainNameChars.contains($0) })
                skip(while: \.isWhitespace)
                guard take(state.end) else { throw .invalidConfigVariableSyntax }
                guard !variable.isEmpty, !value.isEmpty else { throw .invalidConfigVariableSyntax }
                guard variable == "CONTENT_TYPE", contentTypes[value] != nil || value == "text/html" || value == "text/plain" else {
                    throw .unrecognisedConfigVariable
                }
                tokens.append(.contentType(value))
                setNewLine = standalone(state)
            default:
                flushWhitespace()
                let (n, transforms) = try name(state)
                tokens.append(.variable(n, transforms, escaped: true))
            }
            state.newLine = setNewLine
        }
        guard state.section == nil else { throw .expectedSectionEnd }
        return Template(tokens: tokens)
    }

    func findClose(_ end: [Character]) -> Int? {
        var i = pos
        while i + end.count <= chars.count {
            if Array(chars[i..<i + end.count]) == end { return i }
            i += 1
        }
        return nil
    }
}

// MARK: - Rendering

private struct Context {
    var stack: [TemplateValue]
    var sequence: TemplateValue?
    var indentation: String?
    var escape: TemplateEscape

    func with(_ value: TemplateValue, sequence: TemplateValue? = nil) -> Context {
        Context(stack: stack + [value], sequence: sequence, indentation: indentation, escape: escape)
    }
}

private struct Renderer {
    let library: TemplateLibrary?
    let budget: TemplateBudget?
    let contentTypes: [String: TemplateEscape]
    let maxDepth: Int
    /// An empty string is false in a section (the sinks' event text), else true (plain Mustache).
    let emptyTextIsFalse: Bool

    mutating func render(_ template: Template, _ context: Context, depth: Int) -> String {
        guard depth <= maxDepth else { return "" }
        var out = ""
        var context = context
        let indentation = context.indentation ?? ""
        for token in template.tokens {
            let s = renderToken(token, &context, depth: depth)
            if !indentation.isEmpty, !s.isEmpty, out.last == "\n" { out += indentation }
            out += s
        }
        return out
    }

    func paid(_ s: String) -> String { budget?.take(s) ?? s }

    mutating func renderToken(_ token: Template.Token, _ context: inout Context, depth: Int) -> String {
        switch token {
        case .text(let t):
            return t
        case .variable(let name, let transforms, let escaped):
            guard let v = lookup(name, transforms, context) else { return "" }
            // Text, lists and objects pay for what they insert; numbers and booleans are short.
            let s: String
            switch v {
            case .text, .list, .object: s = paid(text(of: v))
            default: s = text(of: v)
            }
            return escaped ? context.escape(s) : s
        case .section(let name, let transforms, let body):
            let v = lookup(name, transforms, context)
            switch v {
            case .list(let l):
                // Each repetition is paid for as the next element is fetched, one ahead of its
                // rendering (as swift-mustache iterates), so both stop at the same element.
                guard l.count > 0, budget?.repeatSection() ?? true else { return "" }
                var out = ""
                var i = 0
                while true {
                    let hasNext = i + 1 < l.count && (budget?.repeatSection() ?? true)
                    let seq = TemplateValue.sequence(first: i == 0, last: !hasNext, index: i)
                    out += render(body, context.with(l.element(i), sequence: seq), depth: depth + 1)
                    guard hasNext else { break }
                    i += 1
                }
                return out
            case .bool(let b):
                return b ? render(body, context, depth: depth + 1) : ""
            case .text(let t) where t.isEmpty && emptyTextIsFalse:
                return ""
            case .some(let value):
                return render(body, context.with(value), depth: depth + 1)
            case .none:
                return ""
            }
        case .inverted(let name, let transforms, let body):
            let v = lookup(name, transforms, context)
            switch v {
            case .list(let l):
                let empty = l.count == 0 || !(budget?.repeatSection() ?? true)
                return empty ? render(body, context.with(.list(l)), depth: depth + 1) : ""
            case .bool(let b):
                return b ? "" : render(body, context, depth: depth + 1)
            case .text(let t) where t.isEmpty && emptyTextIsFalse:
                return render(body, context, depth: depth + 1)
            case .some:
                return ""
            case .none:
                return render(body, context, depth: depth + 1)
            }
        case .partial(let name, let indentation, let dynamic):
            var partialName = name
            if dynamic {
                guard case .text(let n) = lookup(name, [], context) else { return "" }
                partialName = n
            }
            guard let t = library?.template(named: partialName) else { return "" }
            var c = context
            c.sequence = nil
            if let indentation { c.indentation = (c.indentation ?? "") + indentation }
            c.escape = Template.htmlEscape
            return render(t, c, depth: depth + 1)
        case .block(let body, let indentation):
            var c = context
            c.sequence = nil
            c.indentation = (c.indentation ?? "") + indentation
            return render(body, c, depth: depth + 1)
        case .contentType(let name):
            if let e = contentTypes[name] {
                context.escape = e
            } else if name == "text/html" {
                context.escape = Template.htmlEscape
            } else if name == "text/plain" {
                context.escape = { $0 }
            }
            return ""
        }
    }

    func text(of v: TemplateValue) -> String {
        switch v {
        case .null, .sequence: return ""
        case .bool(let b): return b ? "true" : "false"
        case .int(let n): return String(n)
        case .double(let d): return "\(d)"
        case .text(let t): return t
        case .list(let l): return budget?.isSpent == true ? "" : l.text()
        case .object(let o): return budget?.isSpent == true ? "" : o.text()
        }
    }

    /// Mustache's name resolution: `.` the current value, `a.b` from the innermost value that
    /// has `a`, `.a` from the current value only, `f(x)` transforms.
    func lookup(_ name: String, _ transforms: [String], _ context: Context) -> TemplateValue? {
        func member(_ name: Substring, of v: TemplateValue) -> TemplateValue? {
            if case .object(let o) = v { return o.child(String(name)) }
            return nil
        }
        func walk(_ names: ArraySlice<Substring>, from v: TemplateValue) -> TemplateValue? {
            var v = v
            for n in names {
                guard let c = member(n, of: v) else { return nil }
                v = c
            }
            return v
        }
        var found: TemplateValue?
        if name == "." {
            found = context.stack.last
        } else if name.isEmpty, !transforms.isEmpty {
            found = context.sequence
        } else if name.first == "." {
            found = walk(name.split(separator: ".")[...], from: context.stack.last!)
        } else {
            let names = name.split(separator: ".")
            if let first = names.first {
                for v in context.stack.reversed() {
                    if let c = member(first, of: v) {
                        found = walk(names.dropFirst(), from: c)
                        break
                    }
                }
            } else {
                found = context.stack.last
            }
        }
        if case .null = found { found = nil }
        guard var v = found else { return nil }
        for t in transforms.reversed() {
            guard let next = transform(v, t) else { return nil }
            v = next
        }
        return v
    }

    func transform(_ v: TemplateValue, _ name: String) -> TemplateValue? {
        switch v {
        case .text(let s):
            switch name {
            case "empty": return .bool(s.isEmpty)
            case "capitalized": return .text(capitalized(s))
            case "lowercased": return .text(s.lowercased())
            case "uppercased": return .text(s.uppercased())
            case "reversed": return .text(String(s.reversed()))
            default: return nil
            }
        case .int(let n):
            switch name {
            case "equalzero": return .bool(n == 0)
            case "plusone": return .int(n &+ 1)
            case "minusone": return .int(n &- 1)
            case "even": return .bool(n & 1 == 0)
            case "odd": return .bool(n & 1 == 1)
            default: return nil
            }
        case .list(let l):
            switch name {
            case "first": return l.count > 0 ? l.element(0) : nil
            case "last": return l.count > 0 ? l.element(l.count - 1) : nil
            case "count": return .int(l.count)
            case "empty": return .bool(l.count == 0)
            case "reversed":
                if let r = l.reversed { return .list(r()) }
                let n = l.count
                let element = l.element
                let reversedText: () -> String = { "" }
                return .list(TemplateList(count: n, element: { element(n - 1 - $0) }, text: reversedText))
            default: return nil
            }
        case .object(let o):
            switch name {
            case "count": return .int(o.keys().count)
            case "empty": return .bool(o.keys().isEmpty)
            case "enumerated", "sorted":
                if let e = o.entries { return .list(e()) }
                let keys = o.keys().sorted()
                let child = o.child
                return .list(
                    TemplateList(
                        count: keys.count,
                        element: { i in
                            let key = keys[i]
                            let value = child(key) ?? .null
                            return .object(
                                TemplateObject(
                                    child: { $0 == "key" ? .text(key) : $0 == "value" ? value : nil }, keys: { ["key", "value"] },
                                    text: { "" }))
                        }, text: { "" }))
            default: return nil
            }
        case .sequence(let first, let last, let index):
            switch name {
            case "first": return .bool(first)
            case "last": return .bool(last)
            case "index": return .int(index)
            case "even": return .bool(index & 1 == 0)
            case "odd": return .bool(index & 1 == 1)
            default: return nil
            }
        case .null, .bool, .double:
            return nil
        }
    }

    /// Each word's first letter upper-cased, the rest lower-cased.
    func capitalized(_ s: String) -> String {
        var out = ""
        var atWordStart = true
        for c in s {
            if c.isWhitespace {
                out.append(c)
                atWordStart = true
            } else if atWordStart {
                out += c.uppercased()
                atWordStart = false
            } else {
                out += c.lowercased()
            }
        }
        return out
    }
}
