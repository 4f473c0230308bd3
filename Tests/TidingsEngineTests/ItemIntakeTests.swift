import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Items are bounded when a poll takes them in (issue 9, item 1): visible markers, never a
/// failure at write time, and the same cut for the same input.
final class ItemIntakeTests: XCTestCase {
    /// Every field stored or sent is scrubbed as the items enter (a parser has decoded them).
    func testSecretsAreScrubbedFromEveryFieldBeforeTheCut() {
        let r = Redactor()
        r.register("intake-secret-1")
        let item = Item(
            key: "k-intake-secret-1", kind: "entry", title: "t intake-secret-1", body: "b intake-secret-1",
            url: "http://x/intake-secret-1",
            data: ["a": ["intake-secret-1", 2], "k-intake-secret-1": "v", "k-intake-secret-1 ": "w", "plain": "ok"],
            fingerprint: "custom")
        let clean = Item(key: "clean", kind: "entry", title: "t")
        let taken = ItemIntake.take([item, clean], redactor: r).items
        XCTAssertEqual(taken[0].key, "k-‹redacted›")
        XCTAssertEqual(taken[0].title, "t ‹redacted›")
        XCTAssertEqual(taken[0].body, "b ‹redacted›")
        XCTAssertEqual(taken[0].url, "http://x/‹redacted›")
        XCTAssertEqual(taken[0].data, ["a": ["‹redacted›", 2], "k-‹redacted›": "v", "k-‹redacted› ": "w", "plain": "ok"])
        XCTAssertEqual(taken[0].fingerprint, "custom", "a provider's fingerprint is kept")
        XCTAssertEqual(taken[1], clean)
        // Two keys that scrub to one are both kept, numbered in key order.
        r.register("intake-secret-2")
        let twice = Item(key: "k", kind: "entry", title: "t", data: ["intake-secret-1": 1, "intake-secret-2": 2])
        XCTAssertEqual(ItemIntake.take([twice], redactor: r).items[0].data, ["‹redacted›": 1, "‹redacted› (2)": 2])
        // Cut after the scrub: no part of a secret straddling the limit is left.
        let long = Item(key: "k", kind: "entry", title: String(repeating: "x", count: 2040) + "intake-secret-1")
        XCTAssertFalse(ItemIntake.take([long], redactor: r).items[0].title.contains("intake-"))
    }

    func deep(_ depth: Int, leaf: JSONValue = 1) -> JSONValue {
        var v = leaf
        for _ in 0..<depth { v = ["a": v] }
        return v
    }

    func depth(of v: JSONValue) -> Int {
        switch v {
        case .array(let a): return 1 + (a.map(depth(of:)).max() ?? 0)
        case .object(let o): return 1 + (o.values.map(depth(of:)).max() ?? 0)
        default: return 0
        }
    }

    func testItemsWithinTheLimitsAreLeftAlone() {
        let items = [
            Item(key: "a", kind: "k", title: "t", data: deep(64)),
            Item(key: "b", kind: "k", title: "t", data: ["s": .string(String(repeating: "x", count: 60_000))]),
        ]
        let r = ItemIntake.take(items)
        XCTAssertEqual(r.items, items)
        XCTAssertTrue(r.cut.isEmpty)
    }

    func testDeepDataIsCutWithAMarkerThatStillSeesChanges() throws {
        let one = ItemIntake.take([Item(key: "d", kind: "k", title: "t", data: deep(509, leaf: 1))])
        let two = ItemIntake.take([Item(key: "d", kind: "k", title: "t", data: deep(509, leaf: 2))])
        let data = one.items[0].data
        XCTAssertEqual(depth(of: data), 64)
        XCTAssertTrue(data.jsonString().contains("…[nested deeper than 64 levels; cut by tidings, digest "))
        XCTAssertEqual(one.cut["d"], ["data nested deeper than 64 levels"])
        XCTAssertNotEqual(one.items[0].fingerprint, two.items[0].fingerprint, "a change below the cut is still a change")
        XCTAssertEqual(ItemIntake.take([Item(key: "d", kind: "k", title: "t", data: deep(509, leaf: 1))]).items, one.items, "the same cut every time")
        // The event that nests old and new data deeper still reads back.
        var event = Event(source: "s", provider: "p", kind: "k", event: .changed, key: "d", title: "t", observedAt: Date(timeIntervalSince1970: 0))
        event.data = ["changes": ["a": ["old": data, "new": two.items[0].data]]]
        XCTAssertEqual(try Event.decode(jsonLine: event.jsonLine()), event)
    }

    func testBigDataAndTextAreCutToTheirBudget() throws {
        var members: [String: JSONValue] = [:]
        for i in 0..<2000 { members[String(format: "m%04d", i)] = .string(String(repeating: "y", count: 100)) }
        let long = String(repeating: "é", count: 5000)
        let r = ItemIntake.take([Item(key: "big", kind: "k", title: long, body: "short", data: .object(members))])
        let item = r.items[0]
        XCTAssertLessThan(item.data.jsonString().utf8.count, 70 << 10)
        XCTAssertEqual(item.data["m0000"], members["m0000"], "members are kept in key order up to the budget")
        XCTAssertNil(item.data["m1999"])
        XCTAssertTrue(item.data["…"]?.stringValue?.contains("more members, over 64 KiB; cut by tidings") == true)
        XCTAssertTrue(item.title.hasPrefix(String(repeating: "é", count: 1024)))
        XCTAssertTrue(item.title.hasSuffix("]") && item.title.contains("10000 bytes in all; cut by tidings, digest "))
        XCTAssertEqual(item.body, "short")
        XCTAssertEqual(Set(r.cut["big"] ?? []), ["title over 2048 bytes", "data over 64 KiB"])
    }

    func testLongKeysStayDistinctAndNonFiniteNumbersBecomeStrings() {
        let prefix = String(repeating: "k", count: 2000)
        let r = ItemIntake.take([
            Item(key: prefix + "1", kind: "k", title: "t"), Item(key: prefix + "2", kind: "k", title: "t"),
            Item(key: "n", kind: "k", title: "t", data: ["nan": .number(.nan), "inf": .number(-.infinity), "ok": 1.5]),
        ])
        XCTAssertNotEqual(r.items[0].key, r.items[1].key)
        XCTAssertLessThan(r.items[0].key.utf8.count, 1200)
        XCTAssertEqual(r.items[2].data, ["nan": "NaN", "inf": "-Infinity", "ok": 1.5])
    }

    func testACustomFingerprintIsKept() {
        let item = Item(key: "c", kind: "k", title: String(repeating: "t", count: 5000), fingerprint: "CRITICAL")
        XCTAssertEqual(ItemIntake.take([item]).items[0].fingerprint, "CRITICAL")
        let plain = Item(key: "p", kind: "k", title: String(repeating: "t", count: 5000))
        let cut = ItemIntake.take([plain]).items[0]
        XCTAssertEqual(cut.fingerprint, cut.contentHash, "a default fingerprint follows the cut content")
    }
}
