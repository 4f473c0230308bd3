import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Pins behaviour that the `make bench` optimisations rewrote by hand.
final class PerformanceGuardTests: XCTestCase {
    /// Fingerprints are stored: the hand-written hex must equal the old `%02x` output
    /// (SHA-256 over length-prefixed parts, first 8 bytes).
    func testFingerprintIsStable() {
        XCTAssertEqual(Fingerprint.of(["ab", "c"]), "f2939f903016e5bb")
        XCTAssertEqual(Fingerprint.of(["a", "bc"]), "b534ce16ac9c8b36")
        XCTAssertEqual(Fingerprint.of([]), "e3b0c44298fc1c14")
    }

    func testSourceNamesMatchTheDocumentedPattern() {
        for ok in ["a", "A1", "disk-usage", "x.y_z", "9lives"] { XCTAssertTrue(ConfigLoader.isValidSourceName(ok), ok) }
        for bad in ["", "-a", ".a", "_a", "a b", "a/b", "ä", "a\n"] { XCTAssertFalse(ConfigLoader.isValidSourceName(bad), bad) }
    }

    func testLineIndexTrimsBlanksNotNewlines() {
        XCTAssertEqual(TOMLLineIndex.trimmed(" \t a = 1 \u{00A0}"[...]), "a = 1")
        XCTAssertEqual(TOMLLineIndex.trimmed("   "[...]), "")
        XCTAssertEqual(TOMLLineIndex.keyPath(" a . \"b.c\" .d "), "a.b.c.d")
    }

    /// The line index's byte fast paths (ASCII text, keys without dots or quotes) give what the
    /// Character rules give, on strings made of blanks, Unicode blanks, combining marks, CR LF.
    func testLineIndexFastPathsAgreeWithCharacters() {
        func blank(_ c: Character) -> Bool { c == " " || c == "\t" || (c.isWhitespace && !c.isNewline) }
        func trimmed(_ s: Substring) -> String {
            guard let first = s.firstIndex(where: { !blank($0) }) else { return "" }
            return String(s[first...s.lastIndex(where: { !blank($0) })!])
        }
        func keyPath(_ raw: String) -> String {
            var parts: [String] = []
            var cur = ""
            var quote: Character? = nil
            for ch in raw {
                if let q = quote {
                    if ch == q { quote = nil } else { cur.append(ch) }
                } else if ch == "\"" || ch == "'" {
                    quote = ch
                } else if ch == "." {
                    parts.append(trimmed(cur[...]))
                    cur = ""
                } else {
                    cur.append(ch)
                }
            }
            parts.append(trimmed(cur[...]))
            return parts.joined(separator: ".")
        }
        let pieces = ["", " ", "\t", "a", "k_1", "=", "\"", "'", ".", "\r", "\n", "\r\n", "\u{00A0}", "\u{301}", "é", "\u{3000}", "#", "["]
        var seed: UInt64 = 23
        for _ in 0..<20_000 {
            var s = ""
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            for k in 0..<Int(seed >> 61) + 1 { s += pieces[Int((seed >> UInt64(4 * k + 3)) & 0xFFFF) % pieces.count] }
            XCTAssertEqual(TOMLLineIndex.trimmed(s[...]), trimmed(s[...]), s.debugDescription)
            XCTAssertEqual(TOMLLineIndex.keyPath(s), keyPath(s), s.debugDescription)
            XCTAssertEqual(TOMLLineIndex.lines(s), s.split(separator: "\n", omittingEmptySubsequences: false), s.debugDescription)
        }
        let index = TOMLLineIndex(text: "# c\nname = 1\n  \"a=b\" = 2\n[t]\nx.y = 'q=r'\n\"é\" = 3\n")
        XCTAssertEqual(index.recordedLine(of: "name"), 2)
        XCTAssertEqual(index.recordedLine(of: "a=b"), 3)
        XCTAssertEqual(index.recordedLine(of: "t"), 4)
        XCTAssertEqual(index.recordedLine(of: "t.x.y"), 5)
        XCTAssertEqual(index.recordedLine(of: "t.é"), 6)
    }

    /// Event ids: 10 time characters then 16 random ones (80 bits from two draws), all
    /// Crockford base32; sortable by time and unique.
    func testEventIDsKeepTheirShape() {
        let t0 = Date(timeIntervalSince1970: 1_790_000_000)
        let ids = (0..<10_000).map { EventID.make(at: t0.addingTimeInterval(Double($0) / 100)) }
        XCTAssertEqual(Set(ids).count, ids.count)
        XCTAssertEqual(ids, ids.sorted(), "later ids sort after earlier ones")
        let alphabet = Set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        for id in ids.prefix(100) {
            XCTAssertEqual(id.count, 26)
            XCTAssertTrue(id.allSatisfy(alphabet.contains), id)
        }
        // Every random position varies (no position left constant by the bit slicing).
        for pos in 10..<26 {
            let chars = Set(ids.map { Array($0)[pos] })
            XCTAssertGreaterThan(chars.count, 20, "position \(pos)")
        }
        XCTAssertEqual(String(EventID.make(at: t0).prefix(10)), "01M3250V00")
    }
}
