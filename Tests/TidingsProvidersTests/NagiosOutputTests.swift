import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsProviders
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class NagiosOutputTests: XCTestCase {
    typealias Datum = NagiosOutput.PerfDatum

    /// The layout of the Monitoring Plugins guidelines: perfdata after `|` on the first line
    /// and on the last long-text line, then perfdata lines.
    func testLongTextAndPerfdataFromEverySection() {
        let o = NagiosOutput(
            parsing: """
                DISK OK - free space: / 3326 MB (56%); | /=2643MB;5948;5958;0;5968
                / 15272 MB (77%);
                /boot 68 MB (69%);
                /home 69357 MB (27%);
                /var/log 819 MB (84%); | /boot=68MB;88;93;0;98
                /home=69357MB;253404;253409;0;253414
                /var/log=818MB;970;975;0;980

                """)
        XCTAssertEqual(o.text, "DISK OK - free space: / 3326 MB (56%);")
        XCTAssertEqual(o.longText, "/ 15272 MB (77%);\n/boot 68 MB (69%);\n/home 69357 MB (27%);\n/var/log 819 MB (84%);")
        XCTAssertEqual(o.perfdata.map(\.label), ["/", "/boot", "/home", "/var/log"])
        XCTAssertEqual(o.perfdata[0], Datum(label: "/", value: 2643, uom: "MB", warn: "5948", crit: "5958", min: 0, max: 5968))
    }

    func testQuotedLabelsUnknownValuesRangesAndOmittedFields() {
        let o = NagiosOutput(parsing: "OK | 'in use'=12.5%;@10:20;~:30 'it''s'=U time=0.003s;;;0 c=5c bogus 'unterminated=1 x=abc\n")
        XCTAssertEqual(o.text, "OK")
        XCTAssertEqual(o.longText, "")
        XCTAssertEqual(
            o.perfdata,
            [
                Datum(label: "in use", value: 12.5, uom: "%", warn: "@10:20", crit: "~:30", min: nil, max: nil),
                Datum(label: "it's", value: nil, uom: "", warn: nil, crit: nil, min: nil, max: nil),
                Datum(label: "time", value: 0.003, uom: "s", warn: nil, crit: nil, min: 0, max: nil),
                Datum(label: "c", value: 5, uom: "c", warn: nil, crit: nil, min: nil, max: nil),
            ])
        XCTAssertEqual(o.perfdata[1].json, .object(["label": .string("it's"), "value": .null]))
        XCTAssertEqual(o.perfdata[2].json, .object(["label": .string("time"), "value": .number(0.003), "uom": .string("s"), "min": .number(0)]))
    }

    func testNoPerfdataAndCRLF() {
        let o = NagiosOutput(parsing: "WARNING - slow\r\nline two\r\n")
        XCTAssertEqual(o.text, "WARNING - slow")
        XCTAssertEqual(o.longText, "line two")
        XCTAssertEqual(o.perfdata, [])
        XCTAssertEqual(NagiosOutput(parsing: "").text, "")
    }

    /// The item: first line the title, long text the body, perfdata in data; the fingerprint
    /// is the state alone, so changing numbers are no event.
    func testItemKeepsTheStateAsFingerprint() {
        let a = ExecProvider.nagiosItem(status: 2, stdout: Data("CRITICAL - down | t=9s\nretried 3 times\n".utf8), name: "web")
        let b = ExecProvider.nagiosItem(status: 2, stdout: Data("CRITICAL - still down | t=12s\nretried 4 times\n".utf8), name: "web")
        XCTAssertEqual(a.title, "CRITICAL - down")
        XCTAssertEqual(a.body, "retried 3 times")
        XCTAssertEqual(a.severity, .critical)
        XCTAssertEqual(a.data["perfdata"], .array([.object(["label": .string("t"), "value": .number(9), "uom": .string("s")])]))
        XCTAssertEqual(a.fingerprint, b.fingerprint)
        XCTAssertEqual(ExecProvider.nagiosItem(status: 0, stdout: Data(), name: "web").title, "web OK")
    }
}

/// `format = "text"`: the whole output one item, compared without trailing blanks; a change's
/// body is the diff, as a page's.
final class ExecTextTests: XCTestCase {
    func testOutputIsOneItemAndAChangeIsADiff() {
        let before = ExecProvider.textItem(stdout: Data("\nfs ok  \n/var 40%\n\n\n".utf8), name: "df")
        XCTAssertEqual(before.key, "output")
        XCTAssertEqual(before.title, "fs ok")
        XCTAssertEqual(before.data["text"]?.stringValue, "\nfs ok\n/var 40%")
        XCTAssertEqual(before.fingerprint, ExecProvider.textItem(stdout: Data("\nfs ok\n/var 40%\n".utf8), name: "df").fingerprint)
        XCTAssertEqual(ExecProvider.textItem(stdout: Data(), name: "df").title, "df (no output)")
        XCTAssertEqual(ExecProvider.textItem(stdout: Data("\r\nfs ok\r\n/var 40%\r\n".utf8), name: "df").fingerprint, before.fingerprint, "CRLF lines")
        let after = ExecProvider.textItem(stdout: Data("\nfs ok\n/var 95%\n".utf8), name: "df")
        XCTAssertNotEqual(before.fingerprint, after.fingerprint)
        let p = ExecProvider(command: ["true"], format: .text, directory: "/", sourceName: "df")
        var event = Event(
            source: "df", provider: "exec", kind: "text", event: .changed, key: "output", title: after.title, body: after.body,
            url: nil, severity: .info, observedAt: Date(), data: ["text": after.data["text"]!, "changes": ["text": ["old": "x"]]])
        p.describe(&event, change: Deduplicator.Change(type: .changed, item: after, previous: before), firstSeen: Date())
        XCTAssertEqual(event.body, "--- before\n+++ after\n@@ -1,3 +1,3 @@\n \n fs ok\n-/var 40%\n+/var 95%")
        XCTAssertEqual(event.data["added"], ["/var 95%"])
        XCTAssertNil(event.data["changes"]?["text"])
        // jsonl and nagios events are left as the core words them.
        var other = event
        other.body = "kept"
        ExecProvider(command: ["true"], format: .jsonl, directory: "/", sourceName: "df")
            .describe(&other, change: Deduplicator.Change(type: .changed, item: after, previous: before), firstSeen: Date())
        XCTAssertEqual(other.body, "kept")
    }
}
