import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite
@testable import TidingsSinks

final class AppriseSinkTests: XCTestCase {
    let urls = ["tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/-100200300", "json://u:hunter2pw@hooks.example/in"]

    func sink(title: String = "{{title}}") throws -> AppriseSink {
        AppriseSink(
            program: .found("/usr/bin/apprise"), urls: urls.map { Secret($0) },
            title: try MessageTemplate(title, markup: .plain),
            body: try MessageTemplate("{{body}}{{#url}}\n{{url}}{{/url}}", markup: .plain))
    }

    /// `ps` shows argv to every local user: the URLs go in the environment only.
    func testURLsAreNeverArguments() throws {
        let call = try sink().invocation(
            for: event("1", severity: .critical, title: "-n Disk", body: "full", url: "https://e.org/d"), program: "/usr/bin/apprise")
        XCTAssertEqual(call.arguments, ["/usr/bin/apprise", "-v", "-i", "text", "-n", "failure", "--title=-n Disk"])
        XCTAssertEqual(call.environment, ["APPRISE_URLS": urls.joined(separator: "\n")])
        XCTAssertEqual(String(decoding: call.stdin, as: UTF8.self), "full\nhttps://e.org/d")
        for url in urls { XCTAssertFalse(call.arguments.joined(separator: " ").contains(url)) }
    }

    func testNotificationTypes() {
        XCTAssertEqual(AppriseSink.notificationType(event("1", severity: .info)), "info")
        XCTAssertEqual(AppriseSink.notificationType(event("1", severity: .info, type: .recovered)), "success")
        XCTAssertEqual(AppriseSink.notificationType(event("1", severity: .warning)), "warning")
        XCTAssertEqual(AppriseSink.notificationType(event("1", severity: .critical)), "failure")
    }

    func testEmptyTitleIsLeftOutAndLongOnesAreCut() throws {
        XCTAssertEqual(try sink(title: "").invocation(for: event("1", body: "b"), program: "a").arguments.last, "info")
        let titleOnly = try sink().invocation(for: event("1", title: "Only a title"), program: "a")
        XCTAssertEqual(titleOnly.arguments.last, "info", "Apprise needs a body: the title becomes it")
        XCTAssertEqual(String(decoding: titleOnly.stdin, as: UTF8.self), "Only a title")
        let long = try sink().invocation(for: event("1", title: String(repeating: "å", count: 40_000), body: "b"), program: "a").arguments.last!
        XCTAssertLessThanOrEqual(long.utf8.count, "--title=".utf8.count + AppriseSink.maxTitleBytes)
        XCTAssertTrue(long.hasSuffix("…"))
    }

    func testExitStatuses() {
        func outcome(_ t: ProcessRunner.Output.Termination) -> DeliveryError? { AppriseSink.outcome(t, reason: ": why", timeout: 60) }
        XCTAssertNil(outcome(.exited(0)))
        XCTAssertEqual(outcome(.exited(1))?.category, .retryable)
        XCTAssertEqual(outcome(.exited(1))?.message, "apprise failed to notify (exit 1): why")
        XCTAssertEqual(outcome(.exited(2))?.category, .gone)
        XCTAssertEqual(outcome(.exited(3))?.category, .gone)
        XCTAssertEqual(outcome(.exited(4))?.category, .permanent, "partly delivered: a retry would notify twice")
        XCTAssertEqual(outcome(.exited(5))?.category, .retryable)
        XCTAssertEqual(outcome(.signaled(9))?.category, .retryable)
        XCTAssertEqual(outcome(.timedOut)?.category, .retryable)
    }

    func testTokenPartsOfURLsAreSecrets() {
        XCTAssertEqual(Set(AppriseURL.secretParts(of: urls[0])), ["AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"])
        XCTAssertEqual(Set(AppriseURL.secretParts(of: urls[1])), ["u", "hunter2pw"])
        XCTAssertTrue(AppriseURL.secretParts(of: "discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js").contains("JHMHI8qBe7bk2ZwO5U711o3dV_js"))
        XCTAssertTrue(AppriseURL.secretParts(of: "json://localhost/?token=abc%2Fdefghijklmnopq").contains("abc/defghijklmnopq"))
    }

    func testMissingCommandDisablesTheSink() async throws {
        var s = try sink()
        s.program = .unusable("the apprise command apprise was not found in $PATH")
        do {
            try await s.deliver([event("1")])
            XCTFail("delivered without a command")
        } catch let e as DeliveryError {
            XCTAssertEqual(e.category, .gone)
            XCTAssertTrue(e.message.contains("not found"), e.message)
        }
    }

    func testURLsAsAListInlineOrOnePerLineInAFile() throws {
        let dir = try scratchDirectory()
        try write("# mine\njson://a.example/x\n\n  json://b.example/y  \n", to: "\(dir)/urls")
        for form in [#"urls = ["json://a.example/x", "json://b.example/y"]"#, #"urls_file = "\#(dir)/urls""#] {
            let config = try loadConfig(
                """
                [sinks.push]
                type = "apprise"
                command = "/bin/true"
                \(form)
                """)
            let sink = try XCTUnwrap(config.sinks.first { $0.name == "push" }?.instance as? AppriseSink, form)
            XCTAssertEqual(sink.urls.map(\.value), ["json://a.example/x", "json://b.example/y"], form)
        }
        let errors = try configErrors(
            """
            [sinks.push]
            type = "apprise"
            urls = [1, 2]
            """)
        XCTAssertTrue(errors.map(\.description).joined().contains("'urls' must be a list of strings"), "\(errors)")
    }
}
