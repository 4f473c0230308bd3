import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class DedupeTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func item(_ key: String, _ title: String = "t") -> Item { Item(key: key, kind: "k", title: title) }

    /// Applies an outcome to a state map, as the recorder does.
    func apply(_ o: Deduplicator.Outcome, to state: inout [String: StoredItem]) {
        for u in o.upserts { state[u.key] = u }
    }

    func run(_ d: Deduplicator, _ state: inout [String: StoredItem], _ items: [Item], baseline: Bool = false, notify: Bool = false, at: Date) -> [String] {
        let o = d.run(previous: state, current: items, baseline: baseline, notifyExisting: notify, now: at)
        apply(o, to: &state)
        return o.changes.map { "\($0.type.rawValue):\($0.item.key)" }
    }

    func testBaselineIsSilentUnlessNotifyExisting() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        let o = d.run(previous: s, current: [item("a"), item("b")], baseline: true, notifyExisting: false, now: t0)
        XCTAssertEqual(o.changes.count, 0)
        XCTAssertEqual(o.baselineCount, 2)
        apply(o, to: &s)
        XCTAssertEqual(s.count, 2)
        let loud = d.run(previous: [:], current: [item("a")], baseline: true, notifyExisting: true, now: t0)
        XCTAssertEqual(loud.changes.map(\.type), [.new])
    }

    /// A window onto a longer list (a feed): leaving it is no removal, coming back is no news
    /// unless the item changed meanwhile; new items are still new.
    func testAWindowForgetsQuietlyAndKnowsItemsThatReturn() {
        let d = Deduplicator(reportsRemovals: false)
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("a"), item("b")], baseline: true, at: t0)
        XCTAssertEqual(run(d, &s, [item("b"), item("c")], at: t0 + 1), ["new:c"], "a left: not removed")
        XCTAssertEqual(s["a"]?.state, .gone, "remembered as gone, so pruned in time")
        XCTAssertEqual(run(d, &s, [item("a"), item("b"), item("c")], at: t0 + 2), [], "a is back, unchanged: not new")
        XCTAssertEqual(run(d, &s, [item("c")], at: t0 + 3), [])
        XCTAssertEqual(run(d, &s, [item("a", "edited"), item("c")], at: t0 + 4), ["changed:a"], "back and edited: changed")
        XCTAssertEqual(s["a"]?.state, .present)
    }

    func testNewChangedRemovedAndUnchanged() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("a"), item("b")], baseline: true, at: t0)
        XCTAssertEqual(run(d, &s, [item("a"), item("b")], at: t0 + 1), [])
        XCTAssertEqual(run(d, &s, [item("a", "t2"), item("b"), item("c")], at: t0 + 2), ["changed:a", "new:c"])
        XCTAssertEqual(run(d, &s, [item("a", "t2")], at: t0 + 3).sorted(), ["removed:b", "removed:c"])
        // Presence semantics: a removed item that returns is new again.
        XCTAssertEqual(run(d, &s, [item("a", "t2"), item("b")], at: t0 + 4), ["new:b"])
    }

    func testUnchangedItemsAreNotRewritten() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("a"), item("b")], baseline: true, at: t0)
        let o = d.run(previous: s, current: [item("a"), item("b")], baseline: false, notifyExisting: false, now: t0 + 1)
        XCTAssertTrue(o.upserts.isEmpty)
    }

    func testDuplicateEntriesAreSeparateItems() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("x")], baseline: true, at: t0)
        XCTAssertEqual(run(d, &s, [item("x"), item("x")], at: t0 + 1), ["new:x#2"])
        XCTAssertEqual(run(d, &s, [item("x")], at: t0 + 2), ["removed:x#2"])
    }

    /// Issue 9, item 15: repeated keys were numbered in arrival order, so a server listing
    /// them in a varying order made them `changed` on every poll.
    func testRepeatedKeysInAnyOrderAreStable() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        let a = item("x", "A")
        let b = item("x", "B")
        let c = item("x", "C")
        _ = run(d, &s, [a, b, c], baseline: true, at: t0)
        XCTAssertEqual(run(d, &s, [c, a, b], at: t0 + 1), [])
        XCTAssertEqual(run(d, &s, [b, c, a], at: t0 + 2), [])
        // One of them changes: one `changed`, whatever the order; the others keep their names.
        XCTAssertEqual(run(d, &s, [item("x", "B2"), c, a], at: t0 + 3).count, 1)
        XCTAssertEqual(run(d, &s, [a, c, item("x", "B2")], at: t0 + 4), [])
        // Without any state, the numbering still does not depend on the order.
        let one = Deduplicator.disambiguate([a, b, c]).map { "\($0.key)=\($0.title)" }.sorted()
        let other = Deduplicator.disambiguate([c, b, a]).map { "\($0.key)=\($0.title)" }.sorted()
        XCTAssertEqual(one, other)
    }

    /// Issue 9, item 19: with a custom fingerprint (a Nagios state), new text under the same
    /// fingerprint is stored (what `tidings items` shows) but is not an event.
    func testCustomFingerprintKeepsTheLatestTextWithoutAnEvent() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        func check(_ title: String) -> Item { Item(key: "disk", kind: "check", title: title, fingerprint: "WARNING") }
        _ = run(d, &s, [check("DISK WARNING - 91% used")], baseline: true, at: t0)
        let o = d.run(previous: s, current: [check("DISK WARNING - 93% used")], baseline: false, notifyExisting: false, now: t0 + 60)
        XCTAssertEqual(o.changes.count, 0, "the fingerprint decides what is a change")
        XCTAssertEqual(o.upserts.map(\.item.title), ["DISK WARNING - 93% used"])
        XCTAssertEqual(o.upserts.first?.changedAt, t0, "changed_at stays the last change")
        apply(o, to: &s)
        XCTAssertTrue(
            d.run(previous: s, current: [check("DISK WARNING - 93% used")], baseline: false, notifyExisting: false, now: t0 + 120).upserts.isEmpty,
            "the same text again is not rewritten")
    }

    func testFlapWithinWindowIsOneChangedEvent() {
        let d = Deduplicator(flapWindow: 300)
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("alert")], baseline: true, at: t0)
        XCTAssertEqual(run(d, &s, [], at: t0 + 60), [], "no removed event inside the flap window")
        XCTAssertEqual(run(d, &s, [item("alert")], at: t0 + 120), ["changed:alert"])
        XCTAssertEqual(run(d, &s, [], at: t0 + 180), [])
        XCTAssertEqual(run(d, &s, [], at: t0 + 400), [], "window counts from when it went missing")
        XCTAssertEqual(run(d, &s, [], at: t0 + 481), ["removed:alert"])
        XCTAssertEqual(run(d, &s, [], at: t0 + 900), [], "removed only once")
        XCTAssertEqual(run(d, &s, [item("alert")], at: t0 + 1000), ["new:alert"])
    }

    func testChangedCarriesPrevious() {
        let d = Deduplicator()
        var s: [String: StoredItem] = [:]
        _ = run(d, &s, [item("a", "old")], baseline: true, at: t0)
        let o = d.run(previous: s, current: [item("a", "new")], baseline: false, notifyExisting: false, now: t0 + 1)
        XCTAssertEqual(o.changes.first?.previous?.title, "old")
        XCTAssertEqual(o.changes.first?.item.title, "new")
    }
}
