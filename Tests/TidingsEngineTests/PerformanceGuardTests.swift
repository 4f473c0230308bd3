import Foundation
@testable import TidingsPluginAPI
@testable import TidingsEngine
@testable import TidingsSQLite
@testable import TidingsPOSIX
@testable import TidingsApp
import TidingsTestSupport
import XCTest

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
