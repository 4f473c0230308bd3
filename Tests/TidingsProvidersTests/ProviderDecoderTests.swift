import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

final class ProviderDecoderTests: XCTestCase {
    func json(_ s: String) throws -> JSONValue { try JSONValue.parse(Data(s.utf8)) }

    // MARK: sportdate

    func testSportdateKindsKeysAndUTF8() throws {
        let j = try json(
            """
            {"messages": [
              {"type": "notify", "messagetext": "Du har ett nytt meddelande från Åsa", "actionURL": "https://www.sportdate.se/mobile/mail.aspx"},
              {"type": "messagebox", "messagetext": "Se vårt nya erbjudande", "actionURL": "/mobile/nyhet.aspx"},
              {"Type": "poke", "MessageText": "Øystein vinket"}],
             "success": true}
            """)
        XCTAssertTrue(SportdateProvider.success(j))
        let msgs = try SportdateProvider.decodeMessages(j)
        XCTAssertEqual(msgs.map(\.kind), ["message", "notice", "poke"])
        let base = URL(string: "https://www.sportdate.se")!
        let items = msgs.map { $0.item(base: base) }
        XCTAssertEqual(items[0].title, "Du har ett nytt meddelande från Åsa")
        XCTAssertEqual(items[1].url, "https://www.sportdate.se/mobile/nyhet.aspx")
        XCTAssertNil(items[2].url)
        // Key from type, text and URL: same entry, same key; different text, different key.
        XCTAssertEqual(msgs[0].key, SportdateProvider.Message(type: "notify", text: msgs[0].text, actionURL: msgs[0].actionURL).key)
        XCTAssertNotEqual(msgs[0].key, SportdateProvider.Message(type: "notify", text: "other", actionURL: msgs[0].actionURL).key)
        XCTAssertNotEqual(msgs[0].key, SportdateProvider.Message(type: "messagebox", text: msgs[0].text, actionURL: msgs[0].actionURL).key)
    }

    func testSportdateSuccessFalseAndMissingMessages() throws {
        XCTAssertFalse(SportdateProvider.success(try json(#"{"success": false}"#)))
        XCTAssertFalse(SportdateProvider.success(try json(#"{}"#)))
        XCTAssertEqual(try SportdateProvider.decodeMessages(try json(#"{"messages": null, "success": true}"#)), [])
        XCTAssertThrowsError(try SportdateProvider.decodeMessages(try json(#"[1, 2]"#)))
    }

    // MARK: economic

    func testDraftTitleBodyAndDifferences() throws {
        let j = try json(
            """
            {"draftInvoiceNumber": 6, "date": "2026-11-20", "dueDate": "2026-12-04", "currency": "DKK",
             "netAmount": 3360.0, "vatAmount": 840.0, "grossAmount": 4200.0,
             "customer": {"customerNumber": 106}, "recipient": {"name": "Kunde 106 ApS"}, "notes": {"heading": "Order 1"},
             "lastUpdated": "2026-11-20T09:15:00Z"}
            """)
        let d = try XCTUnwrap(Draft(json: j))
        XCTAssertEqual(d.item.title, "Draft #6 · Kunde 106 ApS · 4,200.00 DKK")
        XCTAssertEqual(d.item.key, "6")
        XCTAssertEqual(d.item.kind, "draft-invoice")
        // Round trip through the item (what state keeps) gives the same draft.
        XCTAssertEqual(Draft(item: d.item), d)
        var e = d
        e.gross = 625
        e.net = 500
        e.vat = 125
        var old = d
        old.gross = 500
        old.net = 400
        old.vat = 100
        XCTAssertEqual(e.differences(from: old), ["gross 500.00 → 625.00 DKK", "net 400.00 → 500.00 DKK", "VAT 100.00 → 125.00 DKK"])
        XCTAssertNotEqual(e.item.fingerprint, old.item.fingerprint)
        XCTAssertEqual(Draft.money(1234567.891), "1,234,567.89")
        XCTAssertEqual(Draft.money(-5), "-5.00")
        XCTAssertEqual(Draft.money(0.005), "0.01")
    }

    func testDraftFingerprintIgnoresIrrelevantFields() throws {
        let a = try XCTUnwrap(Draft(json: try json(#"{"draftInvoiceNumber": 1, "grossAmount": 10, "lastUpdated": "2026-01-01T00:00:00Z"}"#)))
        let b = try XCTUnwrap(Draft(json: try json(#"{"draftInvoiceNumber": 1, "grossAmount": 10, "lastUpdated": "2026-02-01T00:00:00Z", "exchangeRate": 7}"#)))
        XCTAssertEqual(a.item.fingerprint, b.item.fingerprint)
        XCTAssertNil(Draft(json: try json(#"{"grossAmount": 10}"#)))
    }

    func testEconomicErrorSurfacesCodeAndLogId() throws {
        let body = Data(#"{"message": "Authorization not valid.", "errorCode": "E04010", "developerHint": "", "logId": "0HN8X", "httpStatusCode": 401}"#.utf8)
        let e = EconomicProvider.error(HTTPResponse(status: 401, headers: [:], body: body), page: 1)
        XCTAssertEqual(e.category, .auth)
        XCTAssertTrue(e.message.contains("Authorization not valid."), e.message)
        XCTAssertTrue(e.message.contains("E04010"), e.message)
        XCTAssertTrue(e.message.contains("0HN8X"), e.message)
        let r = EconomicProvider.error(HTTPResponse(status: 429, headers: ["retry-after": "120"], body: Data()), page: 2)
        XCTAssertEqual(r.category, .rateLimited)
        XCTAssertEqual(r.retryAfter, 120)
    }

    // MARK: alertmanager

    func testAlertItems() throws {
        let now = Timestamp.parse("2026-11-22T08:10:00Z")!
        let list = try json(
            """
            [{"fingerprint": "a1", "labels": {"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100"},
              "annotations": {"summary": "Disk almost full on db1", "description": "/var is 97% full"},
              "startsAt": "2026-11-22T08:00:00.000Z", "endsAt": "2026-11-22T09:00:00.000Z", "updatedAt": "2026-11-22T08:00:00.000Z",
              "generatorURL": "http://prometheus:9090/graph", "status": {"state": "active"}},
             {"fingerprint": "b2", "labels": {"alertname": "HighLoad", "severity": "page", "instance": "web1"},
              "annotations": {}, "endsAt": "2026-11-22T09:00:00Z"},
             {"fingerprint": "c3", "labels": {"alertname": "Old", "severity": "warning"}, "endsAt": "2026-11-22T08:05:00Z"}]
            """
        ).arrayValue!
        let items = AlertmanagerProvider.items(list, now: now)
        XCTAssertEqual(items.map(\.key), ["a1", "b2"])  // c3's endsAt has passed
        XCTAssertEqual(items[0].title, "Disk almost full on db1")
        XCTAssertEqual(items[0].body, "/var is 97% full")
        XCTAssertEqual(items[0].severity, .critical)
        XCTAssertEqual(items[0].url, "http://prometheus:9090/graph")
        XCTAssertEqual(items[1].title, "HighLoad on web1")
        XCTAssertEqual(items[1].severity, .info)
        XCTAssertEqual(AlertmanagerProvider.format(754), "12m")
        XCTAssertEqual(AlertmanagerProvider.format(3 * 3600 + 300), "3h5m")
    }

    func testAlertFingerprintStableAcrossResends() throws {
        let now = Timestamp.parse("2026-11-22T08:10:00Z")!
        func alert(_ updated: String) throws -> [JSONValue] {
            try json(
                #"[{"fingerprint": "a1", "labels": {"alertname": "X"}, "startsAt": "2026-11-22T08:00:00Z", "endsAt": "\#(updated)", "updatedAt": "\#(updated)"}]"#
            ).arrayValue!
        }
        let a = AlertmanagerProvider.items(try alert("2026-11-22T08:20:00Z"), now: now)
        let b = AlertmanagerProvider.items(try alert("2026-11-22T08:25:00Z"), now: now)
        XCTAssertEqual(a[0].fingerprint, b[0].fingerprint)
    }

    // MARK: statuspage

    func testStatuspageItems() throws {
        let inc = try json(
            """
            {"id": "i1", "name": "Actions degraded", "status": "identified", "impact": "major", "shortlink": "https://stspg.io/i1",
             "incident_updates": [{"id": "u1", "body": "Investigating", "created_at": "2026-11-21T08:00:00Z"},
                                  {"id": "u2", "body": "Identified the cause", "created_at": "2026-11-21T09:00:00Z"}]}
            """)
        let item = try XCTUnwrap(StatuspageProvider.item(inc, maintenance: false, page: "GitHub"))
        XCTAssertEqual(item.key, "i1")
        XCTAssertEqual(item.kind, "notice")
        XCTAssertEqual(item.severity, .critical)
        XCTAssertEqual(item.body, "Identified the cause")
        XCTAssertNil(item.expiresAt)
        let m = try json(
            """
            {"id": "m1", "name": "DB maintenance", "status": "scheduled", "impact": "maintenance",
             "scheduled_for": "2026-11-25T01:00:00Z", "scheduled_until": "2026-11-25T03:00:00Z", "incident_updates": []}
            """)
        let mi = try XCTUnwrap(StatuspageProvider.item(m, maintenance: true, page: "GitHub"))
        XCTAssertEqual(mi.severity, .info)
        XCTAssertEqual(mi.expiresAt, Timestamp.parse("2026-11-25T03:00:00Z"))
        let resolved = try json(#"{"id": "i2", "name": "x", "status": "resolved", "impact": "minor"}"#)
        XCTAssertNil(StatuspageProvider.item(resolved, maintenance: false, page: ""))
        let minor = try json(#"{"id": "i3", "name": "x", "status": "investigating", "impact": "minor"}"#)
        XCTAssertEqual(StatuspageProvider.item(minor, maintenance: false, page: "")?.severity, .warning)
    }

    func testEconomicNextPageMustStayOnTheConfiguredHost() throws {
        let p = EconomicProvider(
            base: URL(string: "https://restapi.e-conomic.com")!, appSecret: Secret("app-token-x"),
            grant: Secret("grant-token-x"), pageSize: 1000, interval: 300)
        let same = try json(#"{"pagination": {"nextPage": "https://restapi.e-conomic.com:443/invoices/drafts?skippages=1&pagesize=1000"}}"#)
        XCTAssertEqual(try p.nextPage(same)?.query, "skippages=1&pagesize=1000")
        XCTAssertNil(try p.nextPage(try json(#"{"pagination": {"lastPage": "x"}}"#)))
        let other = try json(#"{"pagination": {"nextPage": "https://evil.example/invoices/drafts?skippages=1"}}"#)
        XCTAssertThrowsError(try p.nextPage(other))
        XCTAssertEqual(EconomicProvider.callsPerDay(interval: 60, pages: 3), 4320)
    }

    func testQueryEncodingOfMatchers() {
        let url = ProviderSupport.join(
            URL(string: "http://127.0.0.1:9093/am")!, "/api/v2/alerts",
            query: [URLQueryItem(name: "filter", value: #"team=~"help+desk""#)])
        XCTAssertEqual(url.absoluteString, "http://127.0.0.1:9093/am/api/v2/alerts?filter=team%3D~%22help%2Bdesk%22")
    }
}

/// Issue 33: sources that give one field template share its parsed form.
final class SharedFieldTemplateTests: XCTestCase {
    private func parts(_ t: FieldTemplate?) -> UnsafeRawPointer? { t?.parts.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

    func testSourcesGivingOneTemplateShareItsParts() throws {
        let config = try loadConfig(
            """
            [sources.a]
            provider = "http-json"
            url = "http://127.0.0.1:9/a.json"
            title = "{/title} is {/status}"
            [sources.b]
            provider = "http-json"
            url = "http://127.0.0.1:9/b.json"
            title = "{/title} is {/status}"
            [sources.c]
            provider = "http-json"
            url = "http://127.0.0.1:9/c.json"
            title = "{/title} was {/status}"
            """)
        let titles = config.sources.map { ($0.instance as? HTTPJSONProvider)?.title }
        XCTAssertEqual(titles.count, 3)
        XCTAssertNotNil(parts(titles[0]))
        XCTAssertEqual(parts(titles[0]), parts(titles[1]), "one copy for a and b")
        XCTAssertNotEqual(parts(titles[0]), parts(titles[2]))
        XCTAssertNil(FieldTemplate.shared("no pointer here"))
        XCTAssertNil(FieldTemplate.shared("no pointer here"), "a bad spec stays bad when asked again")
    }
}
