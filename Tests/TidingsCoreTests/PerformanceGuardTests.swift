import Foundation
@testable import TidingsCore
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
}
