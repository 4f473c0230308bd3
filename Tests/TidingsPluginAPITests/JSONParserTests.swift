import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// `JSONParser` replaced `JSONDecoder` for `JSONValue`. Providers feed it whatever a remote
/// server sends, so it must accept and refuse what `JSONDecoder` does: that is the oracle.
final class JSONParserTests: XCTestCase {
    private func oracle(_ bytes: [UInt8]) -> JSONValue? { try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)) }
    private func ours(_ bytes: [UInt8]) -> JSONValue? { try? JSONParser.parse(Data(bytes)) }

    private func assertAgrees(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        assertAgrees(Array(text.utf8), file: file, line: line)
    }

    private func assertAgrees(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        let expected = oracle(bytes)
        let got = ours(bytes)
        XCTAssertEqual(got, expected, "input: \(String(decoding: bytes, as: UTF8.self).debugDescription) \(bytes.prefix(16))", file: file, line: line)
    }

    func testValidDocuments() {
        for t in [
            "null", "true", "false", "0", "-0", "1", "-12.5e3", "1E+2", "0.000001", "123456789012345678901234567890",
            "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u0000\\uD83C\\uDF89\"", "\"é ✓ 🎉\"",
            "[]", "{}", " [1, 2 ,3 ] ", "{\"a\":{\"b\":[null,true,{\"c\":\"d\"}]}}", "\n\t\r {\"k\" : 1}\n",
            "{\"a\":1,\"a\":2}", "[1e308]", "[-1e-320]",
            "[1,]", "{\"a\":1,}",  // JSONDecoder tolerates one trailing comma; so do we
        ] { assertAgrees(t) }
    }

    func testInvalidDocuments() {
        for t in [
            "", " ", "nul", "truee", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}", "[1,,]", "[,]", "01", "-", "1.", ".5",
            "1e", "+1", "NaN", "Infinity", "[1e400]", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"", "\"\\uD800\"",
            "\"\\uDC00x\"", "\"\\uD800\\u0041\"", "\"tab\tinside\"", "[", "]", "{", "}", "[1]]", "{} {}", "'single'",
            "[\"a\" \"b\"]", "/* c */ 1", "1 // c",
        ] {
            XCTAssertNil(ours(Array(t.utf8)), t)
            assertAgrees(t)
        }
    }

    func testInvalidUTF8AndNesting() {
        assertAgrees([0x22, 0xFF, 0x22])
        assertAgrees([0x22, 0xC3, 0x22])
        assertAgrees([0x22, 0xED, 0xA0, 0x80, 0x22])  // an encoded surrogate
        assertAgrees(Array(String(repeating: "[", count: 511).utf8) + Array(String(repeating: "]", count: 511).utf8))
        assertAgrees(Array(String(repeating: "[", count: 513).utf8) + Array(String(repeating: "]", count: 513).utf8))
        assertAgrees(Array(String(repeating: "{\"a\":", count: 600).utf8) + [0x31] + Array(String(repeating: "}", count: 600).utf8))
    }

    /// Issue 9, item 15: of repeated member names the kept value must not depend on their order.
    func testRepeatedMemberNamesDoNotDependOnTheirOrder() throws {
        let one = try JSONParser.parse(#"{"state":"ok","n":1,"state":{"x":[1]},"state":"bad"}"#)
        let other = try JSONParser.parse(#"{"state":"bad","state":"ok","n":1,"state":{"x":[1]}}"#)
        XCTAssertEqual(one, other)
        XCTAssertEqual(one["state"], "bad", "the value whose JSON text sorts first")
        XCTAssertEqual(try JSONParser.parse(#"{"a":1,"a":1}"#), ["a": 1])
    }

    func testErrorsSayWhatAndWhere() {
        XCTAssertThrowsError(try JSONValue.parse(Data("{\"items\": [1, 2,, 3]}".utf8))) { error in
            XCTAssertEqual("\(error)", "malformed JSON: unexpected ',' at byte 16")
        }
        XCTAssertThrowsError(try JSONValue.parse(Data("<html>502</html>".utf8))) { error in
            XCTAssertEqual("\(error)", "malformed JSON: unexpected '<' at byte 0")
        }
    }

    /// Round trips of random values, and random byte damage to them: same verdicts, same values.
    func testRandomAndDamagedDocumentsAgree() {
        var rng = SplitMix(seed: 0xF00D)
        for _ in 0..<1_500 {
            let text = Array(RandomJSON.randomValue(&rng, depth: 0).jsonString().utf8)
            assertAgrees(text)
            var damaged = text
            for _ in 0..<(1 + Int(rng.next() % 3)) where !damaged.isEmpty {
                let at = Int(rng.next() % UInt64(damaged.count))
                switch rng.next() % 3 {
                case 0: damaged.remove(at: at)
                case 1: damaged.insert(Self.damage[Int(rng.next() % UInt64(Self.damage.count))], at: at)
                default: damaged[at] = UInt8(truncatingIfNeeded: rng.next())
                }
            }
            assertAgrees(damaged)
        }
    }

    private static let damage = Array("{}[],:\"\\ 0-e.tn\u{1}".utf8)

    func testStoredEventsReadBack() throws {
        let e = Event(
            source: "s", provider: "p", kind: "k", event: .changed, key: "a/b", title: "T \"q\"", body: "",
            url: nil, severity: .critical, observedAt: Date(timeIntervalSince1970: 1_790_000_000), data: ["n": 1.5, "x": [true, .null]])
        XCTAssertEqual(try Event.decode(jsonLine: e.jsonLine()), e)
        XCTAssertThrowsError(try Event.decode(jsonLine: #"{"id":"x"}"#))
        XCTAssertThrowsError(try Event.decode(jsonLine: e.jsonLine().replacingOccurrences(of: "\"changed\"", with: "\"exploded\"")))
    }
}
