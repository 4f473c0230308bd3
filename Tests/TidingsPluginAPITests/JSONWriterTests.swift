import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `CompactJSONWriter` replaced `JSONEncoder` on the hot path. Fingerprints hash its output
/// and are stored, so it must write the very same bytes: `JSONEncoder` is the oracle here.
final class JSONWriterTests: XCTestCase {
    private func oracle<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "null"
    }

    private static let awkwardStrings: [String] = [
        "", "plain", "quote \" and \\ backslash", "a/b//c", "tab\tnl\ncr\rff\u{0C}bs\u{08}",
        "\u{00}\u{01}\u{0F}\u{10}\u{1F}\u{7F}", "é ü ß ✓ 🎉 \u{2028}\u{2029}", "emoji 👩‍👩‍👧 zwj",
        "<script>&amp;</script>", "null", "1e5",
    ]

    static let awkwardNumbers: [Double] = [
        0, -0.0, 1, -1, 42, 0.1, -0.5, 1.5e-7, 123456789.125, 999_999_999_999_999, 1e15, -1e15, 1e16,
        1e21, 1.7976931348623157e308, 5e-324, 2.5, 1234567890123456.7, 9_007_199_254_740_993,
    ]

    func testScalarsMatchJSONEncoder() {
        for s in Self.awkwardStrings { XCTAssertEqual(JSONValue.string(s).jsonString(), oracle(JSONValue.string(s)), s) }
        for n in Self.awkwardNumbers { XCTAssertEqual(JSONValue.number(n).jsonString(), oracle(JSONValue.number(n)), "\(n)") }
        for v: JSONValue in [.null, .bool(true), .bool(false), .array([]), .object([:])] {
            XCTAssertEqual(v.jsonString(), oracle(v))
        }
    }

    func testKeysSortLikeJSONEncoder() {
        let keys = ["b", "a", "B", "A", "a10", "a2", "_x", "ä", "z", "Z", "10", "9", "", "a b", "ab", "aB", "é", "e"]
        let v = JSONValue.object(Dictionary(uniqueKeysWithValues: keys.map { ($0, JSONValue.string($0)) }))
        XCTAssertEqual(v.jsonString(), oracle(v))
    }

    /// Where `JSONEncoder` throws, the writer still writes something `JSONParser` reads back:
    /// writing an event or a stored item never fails.
    func testNonFiniteAndTooDeepAreStillWritten() throws {
        XCTAssertEqual(JSONValue.number(.nan).jsonString(), "null")
        XCTAssertEqual(JSONValue.array([.number(.infinity), .number(-.infinity), 1]).jsonString(), "[null,null,1]")
        var deep = JSONValue.null
        for _ in 0..<600 { deep = .array([deep]) }
        let text = deep.jsonString()
        XCTAssertEqual(
            try JSONParser.parse(text),
            {
                var cut = JSONValue.string(CompactJSONWriter.tooDeepMarker)
                for _ in 0..<(CompactJSONWriter.maximumDepth - 1) { cut = .array([cut]) }
                return cut
            }())
        var fine = JSONValue.null
        for _ in 0..<100 { fine = .object(["k": fine]) }
        XCTAssertEqual(fine.jsonString(), oracle(fine))
        var edge = JSONValue.null
        for _ in 0..<(CompactJSONWriter.maximumDepth - 1) { edge = .object(["k": edge]) }
        XCTAssertEqual(edge.jsonString(), oracle(edge), "the deepest value JSONEncoder writes is written the same")
    }

    func testRandomValuesMatchJSONEncoder() {
        var rng = SplitMix(seed: 0x7161_6E67)
        for i in 0..<2_000 {
            let v = RandomJSON.randomValue(&rng, depth: 0)
            XCTAssertEqual(v.jsonString(), oracle(v), "value #\(i)")
        }
    }

    func testEventLineMatchesJSONEncoder() {
        var rng = SplitMix(seed: 99)
        for i in 0..<300 {
            let e = Event(
                id: EventID.make(), source: "s\(i)", provider: "http-json", kind: "item", event: EventType.allCases[i % EventType.allCases.count],
                key: RandomJSON.randomString(&rng), title: RandomJSON.randomString(&rng), body: RandomJSON.randomString(&rng),
                url: i % 3 == 0 ? nil : "https://example.com/\(i)?a=b&c=d", severity: Severity.allCases[i % 3],
                observedAt: Date(timeIntervalSince1970: 1_790_000_000 + Double(i)), data: RandomJSON.randomValue(&rng, depth: 1))
            XCTAssertEqual(e.jsonLine(), oracle(e.jsonValue), "event #\(i)")
        }
    }

    func testStoredSnapshotMatchesJSONEncoder() {
        var rng = SplitMix(seed: 7)
        for i in 0..<300 {
            let item = Item(
                key: "k\(i)", kind: "notice", title: RandomJSON.randomString(&rng), body: RandomJSON.randomString(&rng),
                url: i % 2 == 0 ? nil : "https://status.example.com/i/\(i)", severity: Severity.allCases[i % 3],
                data: RandomJSON.randomValue(&rng, depth: 1),
                expiresAt: i % 4 == 0 ? nil : Date(timeIntervalSince1970: 1_790_000_000.25 * Double(i % 7)))
            let snap = ItemSnapshot(item)
            XCTAssertEqual(snap.jsonText(), oracle(snap.jsonValue), "snapshot #\(i)")
            let back = ItemSnapshot(stored: snap.jsonText())
            XCTAssertEqual(back?.item(key: item.key, fingerprint: item.fingerprint), item)
        }
    }
}

/// Random JSON for the writer and parser tests.
enum RandomJSON {

    static func randomString(_ rng: inout SplitMix) -> String {
        let alphabet: [Character] = Array("abcXYZ019 _-/\\\"'\n\t\u{0}\u{1F}éß✓🎉\u{2028}.:{}[],")
        return String((0..<Int(rng.next() % 12)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
    }

    static func randomValue(_ rng: inout SplitMix, depth: Int) -> JSONValue {
        switch rng.next() % (depth > 4 ? 4 : 6) {
        case 0: return .null
        case 1: return .bool(rng.next() % 2 == 0)
        case 2:
            let pick = rng.next() % 3
            if pick == 0 { return .number(JSONWriterTests.awkwardNumbers[Int(rng.next() % UInt64(JSONWriterTests.awkwardNumbers.count))]) }
            if pick == 1 { return .number(Double(Int64(bitPattern: rng.next()) % 1_000_000)) }
            return .number(Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF) * (rng.next() % 2 == 0 ? 1 : -1))
        case 3: return .string(RandomJSON.randomString(&rng))
        case 4: return .array((0..<Int(rng.next() % 4)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var o: [String: JSONValue] = [:]
            for _ in 0..<Int(rng.next() % 5) { o[RandomJSON.randomString(&rng)] = randomValue(&rng, depth: depth + 1) }
            return .object(o)
        }
    }
}

/// A tiny seeded generator, so a failure names a reproducible value.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
