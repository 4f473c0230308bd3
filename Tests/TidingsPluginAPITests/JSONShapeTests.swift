import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// Each JSON shape is defined once (`JSONObjectShape`); these pin the shapes themselves: the
/// event (DESIGN §4), the stored item snapshot and the `items --json` line.
final class JSONShapeTests: XCTestCase {
    let t = Date(timeIntervalSince1970: 1_790_000_000)

    /// The writer emits members in declaration order, so each `Member` must be declared sorted.
    func testMembersAreDeclaredInKeyOrder() {
        func sorted<M: RawRepresentable<String> & CaseIterable>(_: M.Type) -> Bool {
            let keys = M.allCases.map(\.rawValue)
            return keys == keys.sorted(by: CompactJSONWriter.keyOrder)
        }
        XCTAssertTrue(sorted(Event.Member.self))
        XCTAssertTrue(sorted(ItemSnapshot.Member.self))
        XCTAssertTrue(sorted(CurrentItem.Member.self))
        XCTAssertTrue(sorted(OutboxEntry.Member.self))
    }

    func testEventLine() throws {
        let e = Event(
            id: "01JD3V0000000000000000000A", source: "s", provider: "p", kind: "message", event: .new, key: "k",
            title: "T", body: "B", url: nil, severity: .warning, observedAt: t, data: ["n": 1])
        XCTAssertEqual(
            e.jsonLine(),
            #"{"body":"B","data":{"n":1},"event":"new","id":"01JD3V0000000000000000000A","key":"k","kind":"message","observed_at":"2026-09-21T14:13:20Z","provider":"p","severity":"warning","source":"s","title":"T","url":null}"#
        )
        XCTAssertEqual(try Event.decode(jsonLine: e.jsonLine()), e)
        XCTAssertEqual(try JSONParser.parse(e.jsonLine()), e.jsonValue)
    }

    /// The stored form must not drift: rows written by earlier versions are read back.
    func testStoredSnapshot() {
        let item = Item(key: "k", kind: "notice", title: "T", url: "https://x/a", data: ["a": [1, 2]], expiresAt: Date(timeIntervalSinceReferenceDate: 12.5))
        let text = ItemSnapshot(item).jsonText()
        XCTAssertEqual(text, #"{"body":"","data":{"a":[1,2]},"expiresAt":12.5,"kind":"notice","severity":"info","title":"T","url":"https://x/a"}"#)
        XCTAssertEqual(ItemSnapshot(stored: text)?.item(key: "k", fingerprint: item.fingerprint), item)
        XCTAssertEqual(ItemSnapshot(Item(key: "k", kind: "k", title: "T")).jsonText(), #"{"body":"","data":{},"kind":"k","severity":"info","title":"T"}"#)
    }

    func testCurrentItemLine() {
        let c = CurrentItem(source: "s", item: Item(key: "k", kind: "alert", title: "T", severity: .critical), firstSeen: t, changedAt: t + 60, missing: false)
        XCTAssertEqual(
            c.jsonLine(),
            #"{"body":"","changed_at":"2026-09-21T14:14:20Z","data":{},"first_seen":"2026-09-21T14:13:20Z","key":"k","kind":"alert","missing":false,"severity":"critical","source":"s","title":"T","url":null}"#
        )
    }
}
