import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// SafeRegex: the linear-time engine for user patterns (silences, feed include/exclude, page ignore).
final class SafeRegexTests: XCTestCase {
    private func matches(_ pattern: String, _ text: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        do { return try SafeRegex(pattern).matches(in: text) } catch {
            XCTFail("'\(pattern)' refused: \(error)", file: file, line: line)
            return false
        }
    }

    private func assertMatches(_ pattern: String, _ texts: String..., file: StaticString = #filePath, line: UInt = #line) {
        for t in texts { XCTAssertTrue(matches(pattern, t, file: file, line: line), "'\(pattern)' should match \(t.debugDescription)", file: file, line: line) }
    }

    private func assertNoMatch(_ pattern: String, _ texts: String..., file: StaticString = #filePath, line: UInt = #line) {
        for t in texts {
            XCTAssertFalse(matches(pattern, t, file: file, line: line), "'\(pattern)' should not match \(t.debugDescription)", file: file, line: line)
        }
    }

    /// The refusal's text, or nil when the pattern compiles.
    private func refusal(_ pattern: String) -> String? {
        do {
            _ = try SafeRegex(pattern)
            return nil
        } catch {
            return error.description
        }
    }

    func testLiteralsAndDot() {
        assertMatches("abc", "abc", "xxabcxx")
        assertNoMatch("abc", "ab", "acb", "")
        assertMatches("", "", "anything")
        assertMatches("a.c", "abc", "a-c", "aéc", "a🚀c")
        assertNoMatch("a.c", "a\nc", "ac")
        assertMatches("(?s)a.c", "a\nc")
        assertMatches("日本", "これは日本語")
        assertMatches("é", "café")
    }

    func testClasses() {
        assertMatches("[abc]", "xbx")
        assertNoMatch("[abc]", "xyz")
        assertMatches("[^a-z]", "abc1")
        assertNoMatch("[^a-z]", "abc")
        assertMatches("^[a-c-]+$", "a-b", "-")  // '-' last is literal
        assertMatches("[]a]", "]")
        assertMatches("[^]a]", "b")
        assertNoMatch("[^]a]", "]a")
        assertMatches("[\\]\\\\]", "]", "\\")
        assertMatches("[\\d_]", "_", "7")
        assertNoMatch("[\\d_]", "x")
        assertMatches("[\\n]", "a\nb")
        assertMatches("[\\x41-\\x43]", "B")
        assertMatches("[α-ω]", "λ")
        assertMatches("[[:alpha:]]+[[:digit:]]", "abc1")
        assertNoMatch("[[:alpha:]]", "123 !")
        assertMatches("[[:^alpha:]]", "ab1")
        assertNoMatch("[[:^alpha:]]", "ab")
        assertMatches("[[:upper:][:digit:]]", "x9")
        assertMatches("[a[]", "[")  // '[' not followed by ':' is literal
        assertMatches("[\\b]", "\u{08}")
    }

    func testEscapes() {
        assertMatches("\\d\\d", "a42")
        assertMatches("\\d", "٣")  // Unicode decimal digits, as Swift's Regex
        assertNoMatch("\\d", "abc")
        assertMatches("\\D", "1a")
        assertNoMatch("\\D", "123")
        assertMatches("^\\w+$", "foo_bar9", "café")
        assertMatches("\\W", "a b")
        assertNoMatch("\\W", "ab_c")
        assertMatches("\\s", "a\tb", "a\u{A0}b")
        assertNoMatch("\\s", "ab")
        assertMatches("\\S", " x ")
        assertMatches("\\n\\t\\r\\f\\v", "\n\t\r\u{0C}\u{0B}")
        assertMatches("\\0", "a\u{0}b")
        assertMatches("\\x41\\x{42}\\u{43}\\u0044", "ABCD")
        assertMatches("\\x{1F680}", "go 🚀")
        assertMatches("\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\\\\\/", ".*+?()[]{}|^$\\/")
        assertNoMatch("a\\.c", "abc")
        assertMatches("\\Qa.b*\\E+", "a.b**")
        assertNoMatch("\\Qa.b\\E", "axb")
    }

    func testAnchors() {
        assertMatches("^abc", "abc def")
        assertNoMatch("^abc", "x abc")
        assertMatches("def$", "abc def", "abc def\n")  // $ also before a final newline
        assertNoMatch("def$", "def ghi", "def\n\n")
        assertMatches("^$", "")
        assertMatches("(?m)^b$", "a\nb\nc")
        assertNoMatch("^b$", "a\nb\nc")
        assertMatches("(?m)^$", "a\n\nb")
        assertMatches("\\Aab", "abc")
        assertNoMatch("(?m)\\Ab", "a\nb")
        assertMatches("c\\z", "abc")
        assertNoMatch("c\\z", "abc\n")
        assertMatches("c\\Z", "abc", "abc\n")
        assertNoMatch("c\\Z", "abc\n\n")
        assertMatches("a^*b", "ab")  // a quantified assertion is allowed
    }

    func testWordBoundary() {
        assertMatches("\\bfull\\b", "disk full", "full.", "(full)")
        assertNoMatch("\\bfull\\b", "fuller", "overfull", "full_size")
        assertMatches("\\Bull", "full")
        assertNoMatch("\\Bfull", "full")
        assertMatches("\\b", "a")
        assertNoMatch("\\b", "", "  ")
        assertMatches("\\bcafé\\b", "un café noir")
        assertNoMatch("\\bcaf\\b", "café")
    }

    func testGroupsAndAlternation() {
        assertMatches("(ab)+c", "ababc")
        assertMatches("(?:ab)+c", "abc")
        assertMatches("(?<year>\\d{4})-(?P<month>\\d\\d)", "on 2024-05-01")
        assertMatches("(?'day'\\d)", "7")
        assertMatches("^(foo|bar)$", "foo", "bar")
        assertNoMatch("^(foo|bar)$", "foobar", "fo")
        assertMatches("^(a|)$", "", "a")
        assertMatches("^(|a)b$", "b", "ab")
        assertMatches("^(a||b)$", "")
        assertMatches("a|", "zzz")  // the empty alternative matches anywhere
        assertMatches("^(?:(?:(?:x)))$", "x")
        assertMatches("a(?#a comment)b", "ab")
    }

    func testQuantifiers() {
        assertMatches("^a*$", "", "aaa")
        assertMatches("^a+$", "a", "aaaa")
        assertNoMatch("^a+$", "")
        assertMatches("^colou?r$", "color", "colour")
        assertMatches("^a{3}$", "aaa")
        assertNoMatch("^a{3}$", "aa", "aaaa")
        assertMatches("^a{2,}$", "aa", "aaaaaa")
        assertNoMatch("^a{2,}$", "a")
        assertMatches("^a{2,4}$", "aa", "aaaa")
        assertNoMatch("^a{2,4}$", "a", "aaaaa")
        assertMatches("^a{0}b$", "b")
        assertMatches("^(ab){2}$", "abab")
        assertMatches("^a*?b+?c??d{1,2}?$", "bd", "aabbcdd")
        assertMatches("a{,2}", "a{,2}")  // not a count: literal, as in PCRE
        assertMatches("x{y}", "x{y}")
        assertMatches("^(a*)*$", "", "aaa")
        assertMatches("^(a?){3}a{3}$", "aaa")
        assertMatches("^[ab]{1000}$", String(repeating: "ab", count: 500))
    }

    func testFlags() {
        assertMatches("(?i)DISK", "disk")
        assertMatches("(?i)disk .* full", "DISK /var is Full")
        assertNoMatch("disk", "DISK")
        assertMatches("(?i)[a-c]+x", "ABCX")
        assertMatches("(?i)[^a]", "B")
        assertNoMatch("(?i)[^a]", "A")
        assertMatches("(?i:ab)c", "ABc")
        assertNoMatch("(?i:ab)c", "ABC")
        assertMatches("(?i)a(?-i)b", "Ab")
        assertNoMatch("(?i)a(?-i)b", "AB")
        assertMatches("(a(?i)b)c", "aBc")
        assertNoMatch("(a(?i)b)c", "aBC")  // a flag set in a group ends with it
        assertMatches("(?i)x|y", "Y")  // ... but carries to later alternatives
        assertMatches("(?im)^disk$", "a\nDISK\nb")
        assertMatches("(?s-i:a.b)", "a\nb")
        assertMatches("(?x) d i s k \\  f # comment\n u l l", "disk full")
        assertMatches("(?x)[ ]", " ")  // whitespace in a class stays
        assertMatches("(?U)a+", "a")
    }

    func testUnicodeCaseFolding() {
        assertMatches("(?i)ÉCOLE", "école")
        assertMatches("(?i)σίσυφος", "ΣΊΣΥΦΟΣ")
        assertMatches("(?i)Σ", "ς")
        assertMatches("(?i)k", "\u{212A}")  // KELVIN SIGN
        assertMatches("(?i)straße", "STRAßE")
        assertMatches("(?i)[à-ÿ]", "À")
        assertMatches("(?i)ǅ", "ǆ")
        assertNoMatch("(?i)é", "e")
    }

    func testRefusals() {
        let cases: [(String, String)] = [
            ("(a)\\1", "backreference '\\1' at offset 3 is not supported"),
            ("(?<n>a)\\k<n>", "backreference '\\k' at offset 7 is not supported"),
            ("(?P<n>a)(?P=n)", "backreference '(?P=' at offset 8 is not supported"),
            ("a(?=b)", "lookahead '(?=' at offset 1 is not supported"),
            ("a(?!b)", "negative lookahead '(?!' at offset 1 is not supported"),
            ("(?<=a)b", "lookbehind '(?<=' at offset 0 is not supported"),
            ("(?<!a)b", "negative lookbehind '(?<!' at offset 0 is not supported"),
            ("(?>a+)b", "atomic group '(?>' at offset 0 is not supported"),
            ("(?(1)a|b)", "conditional '(?(' at offset 0 is not supported"),
            ("(?R)", "recursion '(?R' at offset 0 is not supported"),
            ("a*+", "possessive quantifier '*+' at offset 1 is not supported (write '*')"),
            ("(ab", "missing ')' for the group opened at offset 0"),
            ("ab)", "unmatched ')' at offset 2"),
            ("[ab", "missing ']' for the class opened at offset 0"),
            ("[]", "missing ']' for the class opened at offset 0"),
            ("*a", "quantifier '*' at offset 0 has nothing to repeat"),
            ("a|+", "quantifier '+' at offset 2 has nothing to repeat"),
            ("(?i)*", "quantifier '*' at offset 4 has nothing to repeat"),
            ("a**", "quantifier '*' at offset 2 follows another quantifier"),
            ("a{2}{3}", "quantifier '{3}' at offset 4 follows another quantifier"),
            ("a{5,2}", "bad repetition '{5,2}' at offset 1: the maximum is less than the minimum"),
            ("a{1001}", "too complex: repetition '{1001}' at offset 1 is more than 1000"),
            ("a{2,99999999}", "too complex: repetition '{2,99999999}' at offset 1 is more than 1000"),
            ("(a{1000}){1000}", "too complex: the pattern would compile to more than 20000 instructions"),
            (String(repeating: "(", count: 201) + String(repeating: ")", count: 201), "too complex: groups nested more than 200 deep at offset 200"),
            ("[z-a]", "bad range 'z-a' at offset 1"),
            ("[a-\\d]", "bad range 'a-\\d' at offset 1: a class cannot end a range"),
            ("[[:foo:]]", "unknown POSIX class '[:foo:]' at offset 1"),
            ("\\q", "unknown escape '\\q' at offset 0"),
            ("\\p{L}", "Unicode property class '\\p' at offset 0 is not supported"),
            ("ab\\", "trailing backslash at the end of the pattern"),
            ("\\xZZ", "bad escape '\\xZZ' at offset 0: not a Unicode scalar in hex"),
            ("\\x{D800}", "bad escape '\\x{D800}' at offset 0: not a Unicode scalar in hex"),
            ("(?z)", "unknown flag 'z' in group at offset 0"),
            ("(?<1a>x)", "bad group name at offset 3"),
            ("[\\A]", "'\\A' at offset 1 is not allowed inside brackets"),
        ]
        for (pattern, message) in cases {
            XCTAssertEqual(refusal(pattern), message, pattern)
        }
        XCTAssertNil(refusal(String(repeating: "(", count: 200) + "a" + String(repeating: ")", count: 200)))
        XCTAssertNil(refusal("[a-z]{1000}"))
    }

    func testEqualityAndDescription() throws {
        XCTAssertEqual(try SafeRegex("a+b"), try SafeRegex("a+b"))
        XCTAssertNotEqual(try SafeRegex("a+b"), try SafeRegex("a+c"))
        XCTAssertEqual(try SafeRegex("(?i)disk .* full").description, "(?i)disk .* full")
        XCTAssertEqual(SafeRegex.maxInputScalars, 65_536)
    }

    /// The required-literal scan in front of the simulation must never turn a match away.
    func testRequiredLiteralRuns() {
        assertMatches("(?i)disk .* full", "DiSk /var FuLL", "disk disk x full")
        assertNoMatch("(?i)disk .* full", "full disk ", "disk full", "disk \n full")
        assertMatches("ab(c|d)ef", "xxabdefxx")
        assertNoMatch("ab(c|d)ef", "abef", "efabd")
        assertMatches("x\\b y", "ax y")  // an assertion keeps the literals either side together
        assertNoMatch("x\\B y", "ax y")
        assertMatches("a(?i)B", "ab", "aB")
        assertNoMatch("a(?i)B", "Ab")
        assertMatches("(?i)STRASSE|straße", "Straße")
        assertMatches("^abc$", "abc")
        let n = SafeRegex.maxInputScalars
        assertMatches("ab", String(repeating: "x", count: n - 2) + "ab")
        assertNoMatch("ab", String(repeating: "x", count: n - 1) + "ab")
    }

    /// Only the first 64 Ki scalars are searched, and the end anchors do not match at the cut.
    func testInputLimit() throws {
        let n = SafeRegex.maxInputScalars
        assertMatches("b", String(repeating: "a", count: n - 1) + "b")
        assertNoMatch("b", String(repeating: "a", count: n) + "b")
        assertNoMatch("a$", String(repeating: "a", count: n + 1))
        assertMatches("a$", String(repeating: "a", count: n))
    }

    /// Issue 30 item 14: `(?:.{900}){20}x` kept ~18,000 threads per scalar over 64 Ki scalars
    /// (1.2 billion steps, seconds per field). A search now takes at most about `stepBudget`
    /// steps (counted, not timed): a large program looks at fewer scalars, and a caller that
    /// names its longest text has a pattern that cannot search all of it refused.
    func testEverySearchStaysWithinTheStepBudget() throws {
        let budget = SafeRegex.stepBudget
        let long = String(repeating: "a", count: SafeRegex.maxInputScalars)
        let hostile = try SafeRegex("(?:.{900}){20}x")
        XCTAssertEqual(hostile.scalarLimit, budget / 18_002)
        XCTAssertLessThanOrEqual(hostile.steps(searching: long), budget + 18_002)
        XCTAssertFalse(hostile.matches(in: long + "x"))  // needs 18,001 scalars, looks at 232
        // A match must lie within the limit (1,802 instructions: 2,327 scalars).
        let large = try SafeRegex("(?:.{90}){20}x")
        XCTAssertEqual(large.scalarLimit, budget / 1_802)
        XCTAssertTrue(large.matches(in: String(repeating: "\n", count: 500) + String(repeating: "a", count: 1_800) + "x"))
        XCTAssertFalse(large.matches(in: String(repeating: "\n", count: 600) + String(repeating: "a", count: 1_800) + "x"))
        XCTAssertLessThanOrEqual(large.steps(searching: long), budget + 1_802)
        XCTAssertGreaterThan(large.steps(searching: long), budget / 2, "the count counts")

        // Small programs look at all 64 Ki scalars, at most size × (scalars + 1) steps.
        for pattern in ["(?i)disk .* full", "(a+)+$", "[0-9a-f]{40}", "(a|aa)*b", "\\b\\w+\\b x"] {
            let r = try SafeRegex(pattern, longestInput: SafeRegex.maxInputScalars)
            XCTAssertEqual(r.scalarLimit, SafeRegex.maxInputScalars, pattern)
            XCTAssertLessThanOrEqual(r.steps(searching: long), budget + 64, pattern)
        }

        // Refused for a text it could not search within the budget, with the reason.
        func refusal(_ pattern: String, _ longest: Int) -> String? {
            do {
                _ = try SafeRegex(pattern, longestInput: longest)
                return nil
            } catch { return error.description }
        }
        XCTAssertEqual(
            refusal("(?:.{900}){20}x", SafeRegex.maxInputScalars),
            "too costly for a text of 65536 characters: the pattern compiles to 18002 instructions, and a search may visit each at every character; within 4194304 steps, at most 64 instructions fit (use smaller counts in {n,m})"
        )
        XCTAssertNotNil(refusal("(?:.{900}){20}x", 2048))
        XCTAssertNil(refusal("(?:.{900}){20}x", 232))
        XCTAssertNotNil(refusal("(?:.{900}){20}x", 233))
        XCTAssertNotNil(refusal("[a-z]{100}", SafeRegex.maxInputScalars))
        XCTAssertNil(refusal("[a-z]{100}", 2048))
        XCTAssertNil(refusal("(?:.{900}){20}x", 0))
        XCTAssertEqual(try SafeRegex("[a-z]{1000}").scalarLimit, budget / 1001)
    }

    /// Where both engines mean the same thing, they agree with Swift's backtracking `Regex`.
    /// Left out on purpose, where the engines differ: `$` before a final "\n" (PCRE's rule here,
    /// Swift matches at the very end only); POSIX classes (ASCII here, Unicode in Swift); scalar
    /// vs grapheme-cluster matching (`.` on "e\u{301}"); Swift's default UAX #29 word boundaries
    /// (`\b` inside "can't"); case folds such as `(?i)Σ` on "ς" (matches here only).
    func testAgreesWithSwiftRegex() throws {
        let patterns = [
            "abc", "a", "^a", "a$", "^$", "^abc$", "c$", ".", "^.$", "a.c", "a.*c", "a+", "a{2}", "a{2,}", "a{1,2}b",
            "(ab)+", "(?:a|b)+c", "a|b|c", "foo|bar", "x|", "[abc]", "[^abc]", "[a-z]+", "[A-Z]{2,}", "[^a-zA-Z0-9 ]",
            "[\\]\\[]", "\\d+", "\\D", "\\w+", "\\W", "\\s", "\\S+", "\\bworld\\b", "\\Bor", "\\bfull\\b",
            "(?i)disk .* full", "(?i)FULL", "(?i)école", "(?i)σίσυφος", "(?m)^line2$", "(?m)^$", "(?s)ab.cd", "ab.cd",
            "\\Aa", "a\\z", "newline\\Z", "\\d{4}-\\d{2}-\\d{2}", "[0-9]+:[0-9]+", "\\.", "\\*", "\\(parens\\)", "colou?r",
            "a*?b", "(a|ab)(c|bcd)(d*)", "^[^@]+@[^@]+\\.[a-z]{2,}$", "\\x41", "\\x{65e5}", "é", "日本", "[日本]",
            "[α-ω]+", "(?i)[a-z]+", "(?i)[^a-z]", "🚀", "(?x) a b c ", "(?i:DISK) full", "(?i)a(?-i)B", "\\t", "x*", "",
            "(a+)+$", "(a|a)*b", "end$", "\\s$", "^\\w+\\s\\w+$", "[[:alpha:]]+[[:digit:]]", "é$", "^(a|b)*$",
        ]
        let texts = [
            "", "a", "abc", "aaa", "aab", "ab\ncd", "line1\nline2", "Disk /var is FULL", "disk /var is full",
            "hello world", "foo_bar baz-qux", "x=42, y=-7", "2024-01-31 12:00", "café au lait", "ÉCOLE élève",
            "日本語のテキスト", "Straße", "tab\there", "a.b*c+d?", "[brackets] and (parens)", "🚀 launch 🚀",
            "ΣΊΣΥΦΟΣ σίσυφος", "end with newline\n", "user@example.com", "ABab", "colour",
        ]
        var disagreements: [String] = []
        for p in patterns {
            let ours = try SafeRegex(p)
            let theirs = try Regex(p)
            for t in texts where ours.matches(in: t) != t.contains(theirs) {
                disagreements.append("\(p.debugDescription) on \(t.debugDescription): ours \(ours.matches(in: t))")
            }
        }
        XCTAssertEqual(disagreements, [])
    }

    /// Inputs that take a backtracking engine exponential or quadratic time; correctness only
    /// here (the timings are in the change's notes).
    func testPathologicalPatternsFinish() throws {
        let as10k = String(repeating: "a", count: 10_000)
        XCTAssertFalse(try SafeRegex("(a+)+$").matches(in: as10k + "!"))
        XCTAssertTrue(try SafeRegex("(a+)+$").matches(in: as10k))
        XCTAssertFalse(try SafeRegex("(a|a)*b").matches(in: as10k))
        XCTAssertFalse(try SafeRegex("(x+x+)+y").matches(in: String(repeating: "x", count: 5_000)))
        XCTAssertFalse(try SafeRegex("^(a|aa|aaa)*$").matches(in: as10k + "b"))
        XCTAssertFalse(try SafeRegex("(.*a){20}").matches(in: String(repeating: "a", count: 19) + String(repeating: "b", count: 5_000)))

        let disk = try SafeRegex("(?i)disk .* full")
        let hostile = "disk " + String(repeating: "x", count: 2_048)
        for k in 0..<1_000 { XCTAssertFalse(disk.matches(in: hostile + String(k))) }
        XCTAssertTrue(disk.matches(in: hostile + " FULL"))
        let body = "Disk " + String(repeating: "x", count: 65_536 - 10)
        XCTAssertFalse(disk.matches(in: body))
        XCTAssertTrue(disk.matches(in: body + " full"))
        XCTAssertFalse(disk.matches(in: body + "xxxxxx full"))  // past the 64 Ki limit
    }
}
