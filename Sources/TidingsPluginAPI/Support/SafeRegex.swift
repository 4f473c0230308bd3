/// A regular expression whose search time is linear in the text: O(text length × program size),
/// whatever the pattern (like RE2 and Go's regexp), and bounded: one search takes at most about
/// ``stepBudget`` steps, as a pattern looks at no more scalars than its ``scalarLimit``. For patterns that users type into silences
/// (`title~=REGEX`), feed `include`/`exclude` and page `ignore`, where Swift's backtracking
/// `Regex` can take seconds (`(?i)disk .* full` on long titles) or forever (`(a+)+$`).
///
/// The pattern is parsed into a tree, compiled to a small NFA program (scalar, class, any,
/// assert, split, jump, match) and run as a Thompson simulation: the set of live program
/// counters advances one Unicode scalar at a time, so no input can make it backtrack. It only
/// answers "does it match anywhere": there are no capture groups, which is what makes a plain
/// state set enough, and why lazy quantifiers mean the same as greedy ones.
///
/// Supported: the common RE2/PCRE subset (see `init`). Refused with a ``SyntaxError`` that names
/// the problem and its offset (in Unicode scalars, from 0): backreferences, lookaround, atomic
/// groups, conditionals, recursion, possessive quantifiers, `\p{…}`, patterns that would
/// compile to a too large program, and (when the caller names the longest text it will search)
/// patterns too large to search all of such a text within the budget.
package struct SafeRegex: Sendable, Equatable, CustomStringConvertible {
    /// Why a pattern was refused, e.g. `backreference '\1' at offset 4 is not supported`.
    package struct SyntaxError: Error, CustomStringConvertible, Equatable {
        package var description: String
    }

    /// Text beyond this many Unicode scalars (64 Ki) is not looked at: a match must start and
    /// end within them, and `$`/`\z` do not match at the cut (the text goes on).
    package static let maxInputScalars = 65_536
    /// The largest count in `{n}`, `{n,}`, `{n,m}`.
    package static let maxRepeat = 1_000
    /// The largest compiled program, in instructions (`(a{1000}){1000}` is refused).
    package static let maxProgramSize = 20_000
    /// The deepest nesting of groups.
    package static let maxNesting = 200
    /// The most steps (instructions visited by the simulation) that one search may take: 4 Mi,
    /// about 12 ms at the ~3 ns per step of an optimized build. A search visits each
    /// instruction at most once per scalar, so a program of `n` instructions looks at
    /// `stepBudget / n` scalars at most (``scalarLimit``):
    /// all 64 Ki for up to 64 instructions, 2 Ki for up to 2,048 (`(?:.{900}){20}x`, 18,002
    /// instructions, looks at 232).
    package static let stepBudget = 1 << 22

    package let pattern: String
    private let program: Program
    /// The scalars of a text that a search looks at: ``maxInputScalars``, or fewer for a
    /// program so large that the text would cost more than ``stepBudget`` steps.
    package let scalarLimit: Int

    /// Compiles `pattern`. Syntax: literals; `.` (any scalar but `\n`; any with `s`); classes
    /// `[abc]`, `[^a-z]`, `[]a]`, escapes inside, POSIX `[[:alpha:]]`/`[[:^alpha:]]` (ASCII);
    /// `\d \D \w \W \s \S` (Unicode); `\b \B \A \z \Z`; `\n \t \r \f \v \a \e \0`, `\xHH`,
    /// `\x{H…}`, `\uHHHH`, `\u{H…}`, `\Q…\E`, escaped punctuation; `^ $` (line anchors with `m`;
    /// `$` without `m` also matches before a final `\n`); groups `(…)`, `(?:…)`, `(?<n>…)`,
    /// `(?P<n>…)`, `(?'n'…)`, comments `(?#…)`; flags `i s m x U` as `(?im)`, `(?-i)`, `(?i:…)`;
    /// `|`; `* + ? {n} {n,} {n,m}` and their lazy `?` forms.
    ///
    /// `longestInput`: the longest text (in scalars) that the caller will search; a pattern
    /// whose ``scalarLimit`` is shorter (it could not look at all of such a text within
    /// ``stepBudget``) is refused, saying how many instructions fit. 0 checks nothing (a stored
    /// pattern read back: the limit still bounds its cost).
    package init(_ pattern: String, longestInput: Int = 0) throws(SyntaxError) {
        var parser = Parser(pattern)
        let tree = try parser.parse()
        program = try Compiler.compile(tree)
        self.pattern = pattern
        let size = program.instructions.count
        scalarLimit = min(Self.maxInputScalars, Self.stepBudget / size)
        let longest = min(longestInput, Self.maxInputScalars)
        if longest > scalarLimit {
            throw SyntaxError(
                description:
                    "too costly for a text of \(longest) characters: the pattern compiles to \(size) instructions, and a search may visit each at every character; within \(Self.stepBudget) steps, at most \(Self.stepBudget / longest) instructions fit (use smaller counts in {n,m})"
            )
        }
    }

    /// True when the pattern matches anywhere in `text` (an unanchored search, like
    /// `text.contains(regex)`); looks at the first ``scalarLimit`` scalars only.
    package func matches(in text: String) -> Bool {
        program.mayMatch(text, limit: scalarLimit) && program.search(text, limit: scalarLimit).matched
    }

    /// The steps one search of `text` takes (the required-literal scan left out), for tests.
    func steps(searching text: String) -> Int {
        program.search(text, limit: scalarLimit).steps
    }

    package var description: String { pattern }

    package static func == (a: SafeRegex, b: SafeRegex) -> Bool { a.pattern == b.pattern }
}

private typealias SyntaxError = SafeRegex.SyntaxError

// MARK: - Scalars and classes

/// Simple (one scalar to one scalar) case mappings. Case-insensitive matching treats two scalars
/// as equal when their lowercase or their uppercase forms are equal (`k`, `K`, KELVIN SIGN;
/// `σ`, `ς`, `Σ`); mappings to several scalars (`ß` → `SS`) are not used.
private enum CaseMap {
    static func lower(_ c: Unicode.Scalar) -> Unicode.Scalar {
        if c.value < 0x80 { return (0x41...0x5A).contains(c.value) ? Unicode.Scalar(UInt8(c.value + 32)) : c }
        return c.properties.changesWhenLowercased ? single(c.properties.lowercaseMapping) ?? c : c
    }

    static func upper(_ c: Unicode.Scalar) -> Unicode.Scalar {
        if c.value < 0x80 { return (0x61...0x7A).contains(c.value) ? Unicode.Scalar(UInt8(c.value - 32)) : c }
        return c.properties.changesWhenUppercased ? single(c.properties.uppercaseMapping) ?? c : c
    }

    private static func single(_ s: String) -> Unicode.Scalar? {
        var it = s.unicodeScalars.makeIterator()
        guard let first = it.next(), it.next() == nil else { return nil }
        return first
    }
}

/// `\d \D \w \W \s \S`, Unicode-aware like Swift's `Regex`: decimal digits (Nd); letters,
/// marks, Nd digits and connector punctuation such as `_`; White_Space.
private enum Builtin: Sendable {
    case digit, notDigit, word, notWord, space, notSpace

    func contains(_ c: Unicode.Scalar) -> Bool {
        switch self {
        case .digit: return Self.isDigit(c)
        case .notDigit: return !Self.isDigit(c)
        case .word: return Self.isWord(c)
        case .notWord: return !Self.isWord(c)
        case .space: return Self.isSpace(c)
        case .notSpace: return !Self.isSpace(c)
        }
    }

    static func isDigit(_ c: Unicode.Scalar) -> Bool {
        c.value < 0x80 ? (0x30...0x39).contains(c.value) : c.properties.numericType == .decimal
    }

    /// A `\w` scalar; also what `\b` looks at.
    static func isWord(_ c: Unicode.Scalar) -> Bool {
        if c.value < 0x80 {
            let v = c.value
            return (0x30...0x39).contains(v) || (0x41...0x5A).contains(v) || (0x61...0x7A).contains(v) || v == 0x5F
        }
        let p = c.properties
        switch p.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark, .connectorPunctuation, .decimalNumber: return true
        default: return p.isAlphabetic || p.isJoinControl
        }
    }

    static func isSpace(_ c: Unicode.Scalar) -> Bool {
        c.value < 0x80 ? c.value == 0x20 || (0x09...0x0D).contains(c.value) : c.properties.isWhitespace
    }
}

/// A bracket class (or `\d`-like escape): ranges plus builtins, maybe negated and case-folded.
/// Membership of the 128 ASCII scalars is precomputed as a bitmap.
private struct ScalarSet: Sendable {
    var ranges: [ClosedRange<UInt32>] = []
    var builtins: [Builtin] = []
    var negated = false
    var foldCase = false
    private var asciiLow: UInt64 = 0
    private var asciiHigh: UInt64 = 0

    init(foldCase: Bool) { self.foldCase = foldCase }

    init(_ builtin: Builtin) {
        builtins = [builtin]
        finish()
    }

    /// Sorts and merges the ranges and fills the ASCII bitmap; call once, after the last member.
    mutating func finish() {
        ranges.sort { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<UInt32>] = []
        for r in ranges {
            if let last = merged.last, r.lowerBound <= last.upperBound &+ 1 {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                merged.append(r)
            }
        }
        ranges = merged
        for v in 0..<128 {
            let c = Unicode.Scalar(UInt8(v))
            if slowContains(c, lower: CaseMap.lower(c), upper: CaseMap.upper(c)) {
                if v < 64 { asciiLow |= 1 << UInt64(v) } else { asciiHigh |= 1 << UInt64(v - 64) }
            }
        }
    }

    /// Whether the text scalar `c` (with its case mappings) is in the class.
    func contains(_ c: Unicode.Scalar, lower: Unicode.Scalar, upper: Unicode.Scalar) -> Bool {
        let v = c.value
        if v < 64 { return asciiLow & (1 << UInt64(v)) != 0 }
        if v < 128 { return asciiHigh & (1 << UInt64(v - 64)) != 0 }
        return slowContains(c, lower: lower, upper: upper)
    }

    private func slowContains(_ c: Unicode.Scalar, lower: Unicode.Scalar, upper: Unicode.Scalar) -> Bool {
        var hit = listed(c)
        if !hit && foldCase { hit = listed(lower) || listed(upper) }
        return hit != negated
    }

    /// In a range or builtin, before negation and folding.
    private func listed(_ c: Unicode.Scalar) -> Bool {
        var lo = 0
        var hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if ranges[mid].upperBound < c.value { lo = mid + 1 } else { hi = mid }
        }
        if lo < ranges.count && ranges[lo].contains(c.value) { return true }
        return builtins.contains { $0.contains(c) }
    }
}

/// POSIX bracket classes (ASCII, as in PCRE and RE2).
private let posixClasses: [String: [ClosedRange<UInt32>]] = [
    "alnum": [0x30...0x39, 0x41...0x5A, 0x61...0x7A], "alpha": [0x41...0x5A, 0x61...0x7A],
    "ascii": [0x00...0x7F], "blank": [0x09...0x09, 0x20...0x20], "cntrl": [0x00...0x1F, 0x7F...0x7F],
    "digit": [0x30...0x39], "graph": [0x21...0x7E], "lower": [0x61...0x7A], "print": [0x20...0x7E],
    "punct": [0x21...0x2F, 0x3A...0x40, 0x5B...0x60, 0x7B...0x7E], "space": [0x09...0x0D, 0x20...0x20],
    "upper": [0x41...0x5A], "word": [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A],
    "xdigit": [0x30...0x39, 0x41...0x46, 0x61...0x66],
]

// MARK: - Syntax tree

/// A zero-width test of the scalars either side of a position.
private enum Assertion: Sendable {
    case textStart  // \A, ^
    case lineStart  // ^ with (?m)
    case textEnd  // \z
    case textEndOrFinalNewline  // \Z, $
    case lineEnd  // $ with (?m)
    case wordBoundary  // \b
    case notWordBoundary  // \B

    /// `prev` is the scalar before the position, `next` the one after it, `afterNext` the one
    /// after that (nil past the end of the text).
    func holds(prev: Unicode.Scalar?, next: Unicode.Scalar?, afterNext: Unicode.Scalar?) -> Bool {
        switch self {
        case .textStart: return prev == nil
        case .lineStart: return prev == nil || prev == "\n"
        case .textEnd: return next == nil
        case .textEndOrFinalNewline: return next == nil || (next == "\n" && afterNext == nil)
        case .lineEnd: return next == nil || next == "\n"
        case .wordBoundary, .notWordBoundary:
            let before = prev.map(Builtin.isWord) ?? false
            let after = next.map(Builtin.isWord) ?? false
            return (before != after) == (self == .wordBoundary)
        }
    }
}

/// The parsed pattern; flags are already applied (a literal knows whether it ignores case).
private indirect enum Node {
    case empty
    case literal(Unicode.Scalar, foldCase: Bool)
    case any(dotAll: Bool)
    case set(ScalarSet)
    case assertion(Assertion)
    case concat([Node])
    case alternation([Node])
    case repetition(Node, min: Int, max: Int?)  // max nil: unbounded
}

// MARK: - Parser

/// Recursive descent over the pattern's scalars; recursion depth is bounded by group nesting.
private struct Parser {
    struct Flags {
        var foldCase = false, dotAll = false, multiline = false, extended = false
    }

    /// What the last item of a sequence was, for quantifiers.
    enum Last { case nothing, atom, quantified }

    /// One escape: a scalar, a class like `\d`, or an assertion like `\b`.
    enum Escape {
        case scalar(Unicode.Scalar)
        case builtin(Builtin)
        case assertion(Assertion)
    }

    let s: [Unicode.Scalar]
    var i = 0
    var depth = 0

    init(_ pattern: String) { s = Array(pattern.unicodeScalars) }

    func peek(_ k: Int = 0) -> Unicode.Scalar? { i + k < s.count ? s[i + k] : nil }

    func text(_ r: Range<Int>) -> String {
        var v = String.UnicodeScalarView()
        v.append(contentsOf: s[r.clamped(to: 0..<s.count)])
        return String(v)
    }

    func fail(_ message: String) -> SyntaxError { SyntaxError(description: message) }

    package mutating func parse() throws(SyntaxError) -> Node {
        var flags = Flags()
        let tree = try parseAlternation(&flags)
        if i < s.count { throw fail("unmatched ')' at offset \(i)") }
        return tree
    }

    /// `a|b|…` up to a `)` or the end (not consumed). `flags` changed by `(?i)` in one
    /// alternative stay changed for the next ones, as in PCRE.
    mutating func parseAlternation(_ flags: inout Flags) throws(SyntaxError) -> Node {
        var alternatives = [try parseSequence(&flags)]
        while peek() == "|" {
            i += 1
            alternatives.append(try parseSequence(&flags))
        }
        return alternatives.count == 1 ? alternatives[0] : .alternation(alternatives)
    }

    /// Atoms and their quantifiers up to a `|`, `)` or the end.
    mutating func parseSequence(_ flags: inout Flags) throws(SyntaxError) -> Node {
        var items: [Node] = []
        var last = Last.nothing
        while let c = peek(), c != "|", c != ")" {
            if flags.extended && skipExtendedSpace() { continue }
            let at = i
            if let (lo, hi) = try parseQuantifier() {
                switch last {
                case .atom: items.append(.repetition(items.removeLast(), min: lo, max: hi))
                case .quantified: throw fail("quantifier '\(text(at..<i))' at offset \(at) follows another quantifier")
                case .nothing: throw fail("quantifier '\(text(at..<i))' at offset \(at) has nothing to repeat")
                }
                last = .quantified
                continue
            }
            if c == "(" {
                if let group = try parseGroup(&flags) {
                    items.append(group)
                    last = .atom
                } else {
                    last = .nothing  // (?i) or (?#…)
                }
            } else if c == "\\" && peek(1) == "Q" {
                i += 2
                while let q = peek(), !(q == "\\" && peek(1) == "E") {
                    items.append(.literal(q, foldCase: flags.foldCase))
                    i += 1
                    last = .atom
                }
                i = min(i + 2, s.count)
            } else if c == "\\" && peek(1) == "E" {
                i += 2  // a stray \E is ignored
            } else {
                items.append(try parseAtom(flags))
                last = .atom
            }
        }
        return items.count == 1 ? items[0] : items.isEmpty ? .empty : .concat(items)
    }

    /// With `(?x)`: skips one whitespace scalar or a `#` comment to the end of the line.
    mutating func skipExtendedSpace() -> Bool {
        guard let c = peek() else { return false }
        if c == " " || (0x09...0x0D).contains(c.value) {
            i += 1
            return true
        }
        guard c == "#" else { return false }
        while let d = peek(), d != "\n" { i += 1 }
        return true
    }

    /// `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` and a lazy `?` after it; nil (nothing read) when
    /// there is none. A `{` that does not start a well-formed count is a literal, as in PCRE.
    mutating func parseQuantifier() throws(SyntaxError) -> (Int, Int?)? {
        let at = i
        var bounds: (Int, Int?)
        switch peek() {
        case "*":
            bounds = (0, nil)
            i += 1
        case "+":
            bounds = (1, nil)
            i += 1
        case "?":
            bounds = (0, 1)
            i += 1
        case "{":
            guard let counted = parseCount() else { return nil }
            bounds = counted
        default: return nil
        }
        let written = text(at..<i)
        if let hi = bounds.1, hi < bounds.0 {
            throw fail("bad repetition '\(written)' at offset \(at): the maximum is less than the minimum")
        }
        if max(bounds.0, bounds.1 ?? 0) > SafeRegex.maxRepeat {
            throw fail("too complex: repetition '\(written)' at offset \(at) is more than \(SafeRegex.maxRepeat)")
        }
        if peek() == "?" {
            i += 1  // lazy: the same yes/no answer as greedy
        } else if peek() == "+" {
            throw fail("possessive quantifier '\(written)+' at offset \(at) is not supported (write '\(written)')")
        }
        return bounds
    }

    /// `{n}`, `{n,}`, `{n,m}` at `i`, or nil without moving.
    mutating func parseCount() -> (Int, Int?)? {
        var j = i + 1
        func number(_ j: inout Int) -> Int? {
            var value: Int?
            while j < s.count, ("0"..."9").contains(s[j]) {
                value = min((value ?? 0) * 10 + Int(s[j].value - 0x30), 1_000_000)
                j += 1
            }
            return value
        }
        guard let lo = number(&j) else { return nil }
        var hi: Int? = lo
        if j < s.count && s[j] == "," {
            j += 1
            hi = number(&j)
        }
        guard j < s.count && s[j] == "}" else { return nil }
        i = j + 1
        return (lo, hi)
    }

    /// A group at `(`; nil for one that only sets flags, `(?i)`, or is a comment, `(?#…)`.
    mutating func parseGroup(_ flags: inout Flags) throws(SyntaxError) -> Node? {
        let open = i
        i += 1
        var inner = flags
        if peek() == "?" {
            i += 1
            let c = peek()
            func refuse(_ what: String, _ length: Int) -> SyntaxError {
                fail("\(what) '\(text(open..<open + 2 + length))' at offset \(open) is not supported")
            }
            switch c {
            case ":": i += 1
            case "=": throw refuse("lookahead", 1)
            case "!": throw refuse("negative lookahead", 1)
            case "<" where peek(1) == "=": throw refuse("lookbehind", 2)
            case "<" where peek(1) == "!": throw refuse("negative lookbehind", 2)
            case ">": throw refuse("atomic group", 1)
            case "(": throw refuse("conditional", 1)
            case "|": throw refuse("branch reset group", 1)
            case "P" where peek(1) == "=": throw refuse("backreference", 2)
            case "P" where peek(1) == ">": throw refuse("recursion", 2)
            case "R", "&", "+": throw refuse("recursion", 1)
            case "-" where peek(1).map { ("0"..."9").contains($0) } ?? false: throw refuse("recursion", 2)
            case .some(let d) where ("0"..."9").contains(d): throw refuse("recursion", 1)
            case "#":
                while let d = peek(), d != ")" { i += 1 }
                guard peek() == ")" else { throw fail("missing ')' for the comment opened at offset \(open)") }
                i += 1
                return nil
            case "<", "'", "P":
                if c == "P" { i += 1 }
                guard let opener = peek(), opener == "<" || opener == "'" else {
                    throw fail("unknown group syntax '\(text(open..<i + 1))' at offset \(open)")
                }
                i += 1
                let start = i
                while let d = peek(), d.isASCII, d == "_" || d.properties.isAlphabetic || ("0"..."9").contains(d) { i += 1 }
                guard i > start, !("0"..."9").contains(s[start]), peek() == (opener == "<" ? ">" : "'") else {
                    throw fail("bad group name at offset \(start)")
                }
                i += 1
            default:
                var on = true
                while true {
                    guard let f = peek() else { throw fail("missing ')' for the group opened at offset \(open)") }
                    i += 1
                    switch f {
                    case "i": inner.foldCase = on
                    case "s": inner.dotAll = on
                    case "m": inner.multiline = on
                    case "x": inner.extended = on
                    case "U": break  // ungreedy: no effect on a yes/no answer
                    case "-" where on: on = false
                    case ")":
                        flags = inner
                        return nil
                    case ":": break
                    default: throw fail("unknown flag '\(f)' in group at offset \(open)")
                    }
                    if f == ":" { break }
                }
            }
        }
        depth += 1
        defer { depth -= 1 }
        guard depth <= SafeRegex.maxNesting else {
            throw fail("too complex: groups nested more than \(SafeRegex.maxNesting) deep at offset \(open)")
        }
        let body = try parseAlternation(&inner)
        guard peek() == ")" else { throw fail("missing ')' for the group opened at offset \(open)") }
        i += 1
        return body
    }

    /// `.`, `^`, `$`, a class, an escape or a literal scalar.
    mutating func parseAtom(_ flags: Flags) throws(SyntaxError) -> Node {
        let c = s[i]
        switch c {
        case ".":
            i += 1
            return .any(dotAll: flags.dotAll)
        case "^":
            i += 1
            return .assertion(flags.multiline ? .lineStart : .textStart)
        case "$":
            i += 1
            return .assertion(flags.multiline ? .lineEnd : .textEndOrFinalNewline)
        case "[": return try parseClass(flags)
        case "\\":
            switch try parseEscape(inClass: false) {
            case .scalar(let x): return .literal(x, foldCase: flags.foldCase)
            case .builtin(let b): return .set(ScalarSet(b))
            case .assertion(let a): return .assertion(a)
            }
        default:
            i += 1
            return .literal(c, foldCase: flags.foldCase)
        }
    }

    /// A backslash escape at `i`.
    mutating func parseEscape(inClass: Bool) throws(SyntaxError) -> Escape {
        let at = i
        guard let c = peek(1) else { throw fail("trailing backslash at the end of the pattern") }
        i += 2
        let written = "\\" + String(c)
        switch c {
        case "d": return .builtin(.digit)
        case "D": return .builtin(.notDigit)
        case "w": return .builtin(.word)
        case "W": return .builtin(.notWord)
        case "s": return .builtin(.space)
        case "S": return .builtin(.notSpace)
        case "b": return inClass ? .scalar("\u{08}") : .assertion(.wordBoundary)
        case "B", "A", "z", "Z":
            if inClass { throw fail("'\(written)' at offset \(at) is not allowed inside brackets") }
            return .assertion(c == "B" ? .notWordBoundary : c == "A" ? .textStart : c == "z" ? .textEnd : .textEndOrFinalNewline)
        case "n": return .scalar("\n")
        case "t": return .scalar("\t")
        case "r": return .scalar("\r")
        case "f": return .scalar("\u{0C}")
        case "v": return .scalar("\u{0B}")
        case "a": return .scalar("\u{07}")
        case "e": return .scalar("\u{1B}")
        case "0":
            var value: UInt32 = 0
            for _ in 0..<2 {
                guard let d = peek(), ("0"..."7").contains(d) else { break }
                value = value * 8 + d.value - 0x30
                i += 1
            }
            return .scalar(Unicode.Scalar(UInt8(value)))
        case "1"..."9", "k", "g":
            throw fail("backreference '\(written)' at offset \(at) is not supported")
        case "x", "u":
            var digits = ""
            if peek() == "{" {
                i += 1
                while let d = peek(), d != "}" {
                    digits.unicodeScalars.append(d)
                    i += 1
                }
                guard peek() == "}" else { throw fail("missing '}' in '\(written){' at offset \(at)") }
                i += 1
            } else {
                let count = c == "x" ? 2 : 4
                for _ in 0..<count where i < s.count {
                    digits.unicodeScalars.append(s[i])
                    i += 1
                }
                guard digits.unicodeScalars.count == count else { throw fail("'\(written)' at offset \(at) needs \(count) hex digits") }
            }
            guard digits.count <= 8, digits.unicodeScalars.allSatisfy(\.properties.isASCIIHexDigit), let v = UInt32(digits, radix: 16),
                let scalar = Unicode.Scalar(v)
            else {
                throw fail("bad escape '\(text(at..<i))' at offset \(at): not a Unicode scalar in hex")
            }
            return .scalar(scalar)
        case "p", "P":
            throw fail("Unicode property class '\(written)' at offset \(at) is not supported")
        case "Q" where inClass, "E" where inClass:
            throw fail("'\(written)' at offset \(at) is not supported inside brackets")
        default:
            if c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c)) {
                throw fail("unknown escape '\(written)' at offset \(at)")
            }
            return .scalar(c)  // escaped punctuation, space, or any other scalar
        }
    }

    /// `[…]` at `i`.
    mutating func parseClass(_ flags: Flags) throws(SyntaxError) -> Node {
        let open = i
        i += 1
        var set = ScalarSet(foldCase: flags.foldCase)
        if peek() == "^" {
            set.negated = true
            i += 1
        }
        var first = true
        while true {
            guard let c = peek() else { throw fail("missing ']' for the class opened at offset \(open)") }
            if c == "]" && !first {
                i += 1
                break
            }
            first = false
            if c == "[" && peek(1) == ":", try parsePOSIX(into: &set) { continue }
            let at = i
            guard let lo = try classMember(into: &set) else { continue }
            if peek() == "-", let end = peek(1), end != "]" {
                i += 1
                guard let hi = try classMember(into: &set) else {
                    throw fail("bad range '\(text(at..<i))' at offset \(at): a class cannot end a range")
                }
                guard lo.value <= hi.value else { throw fail("bad range '\(text(at..<i))' at offset \(at)") }
                set.ranges.append(lo.value...hi.value)
            } else {
                set.ranges.append(lo.value...lo.value)
            }
        }
        set.finish()
        return .set(set)
    }

    /// One member of a class: its scalar, or nil after adding a `\d`-like class to `set`.
    mutating func classMember(into set: inout ScalarSet) throws(SyntaxError) -> Unicode.Scalar? {
        let c = s[i]
        guard c == "\\" else {
            i += 1
            return c
        }
        switch try parseEscape(inClass: true) {
        case .scalar(let x): return x
        case .builtin(let b):
            set.builtins.append(b)
            return nil
        case .assertion: return nil  // parseEscape refuses these inside brackets
        }
    }

    /// `[:name:]` or `[:^name:]` at `i`; false (nothing read) when this `[` is not one.
    mutating func parsePOSIX(into set: inout ScalarSet) throws(SyntaxError) -> Bool {
        var j = i + 2
        let negated = j < s.count && s[j] == "^"
        if negated { j += 1 }
        let start = j
        while j < s.count, s[j].isASCII, s[j].properties.isAlphabetic { j += 1 }
        guard j + 1 < s.count, s[j] == ":", s[j + 1] == "]" else { return false }
        let name = text(start..<j)
        guard let ranges = posixClasses[name] else {
            throw fail("unknown POSIX class '\(text(i..<j + 2))' at offset \(i)")
        }
        if negated {
            var next: UInt32 = 0
            for r in ranges {
                if r.lowerBound > next { set.ranges.append(next...r.lowerBound - 1) }
                next = r.upperBound + 1
            }
            set.ranges.append(next...0x10FFFF)
        } else {
            set.ranges += ranges
        }
        i = j + 2
        return true
    }
}

// MARK: - Program

/// One NFA instruction. The scalar-consuming ones move the thread on by one on a match.
private enum Instruction: Sendable {
    case scalar(Unicode.Scalar)
    /// A case-insensitive literal, by its lower and upper case forms.
    case foldedScalar(lower: Unicode.Scalar, upper: Unicode.Scalar)
    case set(Int)  // index into Program.sets
    case anyScalar
    case anyButNewline
    case assert(Assertion)
    case split(Int, Int)
    case jump(Int)
    case match
}

private struct Program: Sendable {
    var instructions: [Instruction] = []
    var sets: [ScalarSet] = []
    /// Starts with `\A` (or `^` without `m`): threads start at offset 0 only.
    var anchored = false
    /// Has case-insensitive instructions, so the text scalar's case mappings are needed.
    var foldsCase = false
    /// Runs of literals that every match contains, in this order: those of the pattern's
    /// top-level sequence, split where anything but an assertion comes between them. A quick
    /// scan for them (``mayMatch(_:)``) turns most texts away before the simulation.
    var requiredRuns: [[Instruction]] = []

    /// False when the text (its first `limit` scalars) lacks a required run, so that it cannot
    /// match. A naive search, resumed after each run found: O(text × run).
    func mayMatch(_ text: String, limit: Int) -> Bool {
        let scalars = text.unicodeScalars
        var start = scalars.startIndex
        var offset = 0  // where the next run may begin
        for run in requiredRuns {
            while true {
                if offset + run.count > limit { return false }
                var i = start
                var k = 0
                while k < run.count, i < scalars.endIndex, run[k].acceptsLiteral(scalars[i]) {
                    scalars.formIndex(after: &i)
                    k += 1
                }
                if k == run.count {
                    start = i
                    offset += run.count
                    break
                }
                if i == scalars.endIndex { return false }
                scalars.formIndex(after: &start)
                offset += 1
            }
        }
        return true
    }
}

extension Instruction {
    /// For `.scalar` and `.foldedScalar` (the literals of ``Program/requiredRuns``).
    func acceptsLiteral(_ c: Unicode.Scalar) -> Bool {
        switch self {
        case .scalar(let x): return c == x
        case .foldedScalar(let l, let u): return c == l || c == u || CaseMap.lower(c) == l || CaseMap.upper(c) == u
        default: return false
        }
    }
}

/// Turns the tree into a ``Program``; counted repetition is unrolled.
private enum Compiler {
    static func compile(_ tree: Node) throws(SyntaxError) -> Program {
        guard size(tree) < SafeRegex.maxProgramSize else {
            throw SyntaxError(description: "too complex: the pattern would compile to more than \(SafeRegex.maxProgramSize) instructions")
        }
        var program = Program()
        emit(tree, into: &program)
        program.instructions.append(.match)
        let items: [Node]
        switch tree {
        case .concat(let all): items = all
        case .literal, .assertion: items = [tree]
        default: items = []
        }
        if case .assertion(.textStart)? = items.first { program.anchored = true }
        var run: [Instruction] = []
        for item in items {
            switch item {
            case .literal:
                var literal = Program()
                emit(item, into: &literal)
                run += literal.instructions
            case .assertion:
                continue  // zero-width: the literals either side stay next to each other
            default:
                if !run.isEmpty { program.requiredRuns.append(run) }
                run = []
            }
        }
        if !run.isEmpty { program.requiredRuns.append(run) }
        return program
    }

    /// The number of instructions `node` compiles to, capped just above the limit.
    static func size(_ node: Node) -> Int {
        let cap = SafeRegex.maxProgramSize + 1
        switch node {
        case .empty: return 0
        case .literal, .any, .set, .assertion: return 1
        case .concat(let items): return items.reduce(0) { min($0 + size($1), cap) }
        case .alternation(let alts): return min(alts.reduce(0) { min($0 + size($1), cap) } + 2 * (alts.count - 1), cap)
        case .repetition(let body, let lo, let hi):
            let s = size(body)
            guard let hi else { return min(lo == 0 ? s + 2 : lo * s + 1, cap) }
            return min(lo * s + (hi - lo) * (s + 1), cap)
        }
    }

    static func emit(_ node: Node, into p: inout Program) {
        switch node {
        case .empty:
            break
        case .literal(let c, let fold):
            let lower = CaseMap.lower(c)
            let upper = CaseMap.upper(c)
            if fold && (c.value >= 0x80 || lower != upper) {
                p.instructions.append(.foldedScalar(lower: lower, upper: upper))
                p.foldsCase = true
            } else {
                p.instructions.append(.scalar(c))
            }
        case .any(let dotAll):
            p.instructions.append(dotAll ? .anyScalar : .anyButNewline)
        case .set(let set):
            p.sets.append(set)
            p.instructions.append(.set(p.sets.count - 1))
            if set.foldCase { p.foldsCase = true }
        case .assertion(let a):
            p.instructions.append(.assert(a))
        case .concat(let items):
            for item in items { emit(item, into: &p) }
        case .alternation(let alts):
            // split(L1, next); L1: alt; jump end; next: split(L2, …) … last alt; end:
            var jumps: [Int] = []
            for alt in alts.dropLast() {
                let split = p.instructions.count
                p.instructions.append(.split(split + 1, -1))
                emit(alt, into: &p)
                jumps.append(p.instructions.count)
                p.instructions.append(.jump(-1))
                p.instructions[split] = .split(split + 1, p.instructions.count)
            }
            emit(alts[alts.count - 1], into: &p)
            for j in jumps { p.instructions[j] = .jump(p.instructions.count) }
        case .repetition(let body, let lo, let hi):
            if let hi {
                // body × lo, then (hi − lo) × (split(next, end); body)
                for _ in 0..<lo { emit(body, into: &p) }
                var exits: [Int] = []
                for _ in lo..<hi {
                    exits.append(p.instructions.count)
                    p.instructions.append(.split(p.instructions.count + 1, -1))
                    emit(body, into: &p)
                }
                for e in exits { p.instructions[e] = .split(e + 1, p.instructions.count) }
            } else if lo == 0 {
                // loop: split(body, end); body; jump loop; end:
                let loop = p.instructions.count
                p.instructions.append(.split(loop + 1, -1))
                emit(body, into: &p)
                p.instructions.append(.jump(loop))
                p.instructions[loop] = .split(loop + 1, p.instructions.count)
            } else {
                // body × (lo − 1), then last: body; split(last, next)
                for _ in 1..<lo { emit(body, into: &p) }
                let last = p.instructions.count
                emit(body, into: &p)
                p.instructions.append(.split(last, p.instructions.count + 1))
            }
        }
    }
}

// MARK: - Simulation

extension Program {
    /// Runs a ``Machine`` over the first `limit` scalars of `text` with scratch space for this
    /// program's size; also says how many steps (instructions visited) it took.
    func search(_ text: String, limit: Int) -> (matched: Bool, steps: Int) {
        let n = instructions.count
        // current and next thread lists (n each: duplicates are never added), the closure's
        // stack (each instruction pushes at most 2 once marked: 2n + 1), and the marks.
        let lists = UnsafeMutablePointer<Int>.allocate(capacity: 4 * n + 1)
        let seen = UnsafeMutablePointer<UInt32>.allocate(capacity: n)
        seen.initialize(repeating: 0, count: n)
        defer {
            lists.deallocate()
            seen.deallocate()
        }
        return instructions.withUnsafeBufferPointer { code in
            var machine = Machine(program: self, code: code, current: lists, next: lists + n, stack: lists + 2 * n, seen: seen)
            let matched = machine.run(text, limit: limit)
            return (matched, machine.steps)
        }
    }
}

/// One search: the live threads (program counters waiting on a scalar) at the current and
/// the next position. A generation stamp per instruction keeps each list free of duplicates
/// and stops epsilon loops, so a scalar costs at most the program's size in steps (each
/// instruction visited once, then a consuming one checked once). The buffers belong to
/// ``Program/search(_:limit:)``.
private struct Machine {
    let program: Program
    let code: UnsafeBufferPointer<Instruction>
    var current: UnsafeMutablePointer<Int>
    var currentCount = 0
    var next: UnsafeMutablePointer<Int>
    var nextCount = 0
    let stack: UnsafeMutablePointer<Int>
    let seen: UnsafeMutablePointer<UInt32>
    var generation: UInt32 = 0
    /// Instructions visited so far: at most the program's size per scalar, plus one start.
    var steps = 0

    init(
        program: Program, code: UnsafeBufferPointer<Instruction>, current: UnsafeMutablePointer<Int>,
        next: UnsafeMutablePointer<Int>, stack: UnsafeMutablePointer<Int>, seen: UnsafeMutablePointer<UInt32>
    ) {
        self.program = program
        self.code = code
        self.current = current
        self.next = next
        self.stack = stack
        self.seen = seen
    }

    mutating func run(_ text: String, limit: Int) -> Bool {
        var scalars = text.unicodeScalars.makeIterator()
        var cur = scalars.next()
        var after = cur == nil ? nil : scalars.next()
        generation = 1
        if addThread(0, prev: nil, next: cur, afterNext: after) { return true }
        var position = 0
        while let c = cur, position < limit {
            swap(&current, &next)
            currentCount = nextCount
            nextCount = 0
            generation += 1
            let afterAfter = after == nil ? nil : scalars.next()
            let lower = program.foldsCase ? CaseMap.lower(c) : c
            let upper = program.foldsCase ? CaseMap.upper(c) : c
            for k in 0..<currentCount {
                let pc = current[k]
                if consumes(code[pc], c, lower: lower, upper: upper),
                    addThread(pc + 1, prev: c, next: after, afterNext: afterAfter)
                {
                    return true
                }
            }
            if program.anchored {
                if nextCount == 0 { return false }
            } else if addThread(0, prev: c, next: after, afterNext: afterAfter) {
                return true
            }
            cur = after
            after = afterAfter
            position += 1
        }
        return false
    }

    func consumes(_ instruction: Instruction, _ c: Unicode.Scalar, lower: Unicode.Scalar, upper: Unicode.Scalar) -> Bool {
        switch instruction {
        case .scalar(let x): return c == x
        case .foldedScalar(let l, let u): return c == l || c == u || lower == l || upper == u
        case .set(let k): return program.sets[k].contains(c, lower: lower, upper: upper)
        case .anyScalar: return true
        case .anyButNewline: return c != "\n"
        case .assert, .split, .jump, .match: return false
        }
    }

    /// Adds `pc` and all it reaches without consuming (following splits, jumps and assertions
    /// that hold here) to `next`; true when that reaches `match`.
    mutating func addThread(_ pc: Int, prev: Unicode.Scalar?, next nextScalar: Unicode.Scalar?, afterNext: Unicode.Scalar?) -> Bool {
        var depth = 1
        stack[0] = pc
        while depth > 0 {
            depth -= 1
            let pc = stack[depth]
            if seen[pc] == generation { continue }
            seen[pc] = generation
            steps &+= 1
            switch code[pc] {
            case .match:
                return true
            case .jump(let target):
                stack[depth] = target
                depth += 1
            case .split(let a, let b):
                stack[depth] = b
                stack[depth + 1] = a
                depth += 2
            case .assert(let a):
                if a.holds(prev: prev, next: nextScalar, afterNext: afterNext) {
                    stack[depth] = pc + 1
                    depth += 1
                }
            case .scalar, .foldedScalar, .set, .anyScalar, .anyButNewline:
                next[nextCount] = pc
                nextCount += 1
            }
        }
        return false
    }
}
