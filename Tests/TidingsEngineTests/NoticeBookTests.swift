import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class NoticeBookTests: XCTestCase {
    var store: StateStore!
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    override func setUpWithError() throws {
        store = try makeTestStore()
    }

    func notice(_ key: String, title: String = "Maintenance", expires: Date? = nil) -> Item {
        Item(key: key, kind: "notice", title: title, expiresAt: expires)
    }

    func apply(_ type: EventType, _ item: Item, at now: Date, ttl: TimeInterval = 7 * 86_400) throws -> Event {
        let change = Deduplicator.Change(type: type, item: item, previous: type == .new ? nil : item)
        let event = Event(source: "status", provider: "messagebox", kind: item.kind, event: type, key: item.key, title: item.title, observedAt: now)
        try store.database.write { db in
            try NoticeBook.record(db, source: "status", changes: [change], events: [event], ttl: ttl, now: now)
            try EnqueueStage.insert(db, [event], silenced: [:], decisions: [:], now: now)
        }
        return event
    }

    func testNewNoticeIsPendingUntilTTL() throws {
        let e = try apply(.new, notice("a"), at: t0, ttl: 3600)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0).map(\.id), [e.id])
        XCTAssertEqual(try NoticeBook.pending(store, now: t0.addingTimeInterval(3599)).count, 1)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0.addingTimeInterval(3600)).count, 0)
    }

    func testExpiresAtOverridesTTLAndRemovedEndsIt() throws {
        _ = try apply(.new, notice("m", expires: t0.addingTimeInterval(60)), at: t0)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0.addingTimeInterval(61)).count, 0)
        _ = try apply(.new, notice("i"), at: t0)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0).map(\.key).sorted(), ["i", "m"])
        XCTAssertEqual(try NoticeBook.pending(store, now: t0.addingTimeInterval(61)).map(\.key), ["i"])
        _ = try apply(.removed, notice("i"), at: t0.addingTimeInterval(62))
        XCTAssertEqual(try NoticeBook.pending(store, now: t0.addingTimeInterval(63)).count, 0)
    }

    func testNonNoticeKindsAreIgnored() throws {
        _ = try apply(.new, Item(key: "x", kind: "message", title: "hi"), at: t0)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0).count, 0)
    }

    func testDismissByIdPrefixAndAll() throws {
        let a = try apply(.new, notice("a"), at: t0)
        _ = try apply(.new, notice("b"), at: t0)
        XCTAssertThrowsError(try NoticeBook.dismiss(store, id: "nope", now: t0))
        try NoticeBook.dismiss(store, id: String(a.id.prefix(20)), now: t0)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0).map(\.key), ["b"])
        XCTAssertEqual(try NoticeBook.dismissAll(store, now: t0), 1)
        XCTAssertEqual(try NoticeBook.pending(store, now: t0).count, 0)
    }

    func testChangedMakesDismissedNoticePendingAgain() throws {
        _ = try apply(.new, notice("a"), at: t0)
        XCTAssertEqual(try NoticeBook.dismissAll(store, now: t0), 1)
        let e = try apply(.changed, notice("a", title: "Maintenance extended"), at: t0.addingTimeInterval(5))
        let p = try NoticeBook.pending(store, now: t0.addingTimeInterval(6))
        XCTAssertEqual(p.map(\.id), [e.id])
        XCTAssertEqual(p.first?.title, "Maintenance extended")
    }

    /// Issue 9, item 6: a notice still queued for a sink (the daemon stopped before it was
    /// delivered) got a second row at the next start, and was delivered twice.
    func testRedeliveryAddsNoSecondRowForASinkThatStillHasIt() throws {
        let a = try apply(.new, notice("a"), at: t0)
        let seq: Int64 = try XCTUnwrap(try store.scalar("SELECT seq FROM event WHERE id = ?", a.id))
        try store.exec("INSERT INTO delivery(event_seq, sink, batch, status, next_attempt, created_at) VALUES (?, 'desktop', 'b', 'pending', 0, 0)", seq)
        let router = Router(routes: [], allSinks: ["desktop", "ops"])
        let again = try NoticeBook.redeliverUnseen(store, router: router, now: t0.addingTimeInterval(1))
        XCTAssertEqual(again.map(\.id), [a.id], "ops did not have it")
        let rows: [String] = try store.column("SELECT sink FROM delivery ORDER BY sink")
        XCTAssertEqual(rows, ["desktop", "ops"], "one row per sink, never two")
    }

    func testRedeliverUnseenOnce() throws {
        let a = try apply(.new, notice("a"), at: t0)
        let b = try apply(.new, notice("b"), at: t0)
        try NoticeBook.markSeen(store, ids: [b.id], now: t0)
        let router = Router(routes: [], allSinks: ["desktop", "ops"])
        let again = try NoticeBook.redeliverUnseen(store, router: router, now: t0.addingTimeInterval(1))
        XCTAssertEqual(again.map(\.id), [a.id])
        let rows: Int? = try store.scalar("SELECT count(*) FROM delivery")
        XCTAssertEqual(rows, 2)
        XCTAssertEqual(try NoticeBook.redeliverUnseen(store, router: router, now: t0.addingTimeInterval(2)).count, 0)
    }
}
