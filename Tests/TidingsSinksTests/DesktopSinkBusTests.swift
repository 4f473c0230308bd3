import Foundation
import Logging
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The desktop sink against a real (private) session bus with python3-dbusmock's
/// notification_daemon template recording every Notify call. Skipped when dbus-daemon or
/// dbusmock are not installed.
final class DesktopSinkBusTests: XCTestCase {
    var bus: Process!
    var mock: Process!
    var dir: URL!
    var log: URL { dir.appendingPathComponent("notify.log") }

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"),
            run("/usr/bin/python3", ["-c", "import dbusmock"]) == 0
        else {
            throw XCTSkip("needs dbus-daemon and python3-dbusmock")
        }
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("bus-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let out = Pipe()
        bus = Process()
        bus.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        bus.arguments = ["--session", "--nofork", "--print-address=1"]
        bus.standardOutput = out
        bus.standardError = FileHandle.nullDevice
        try bus.run()
        let address =
            String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
            .split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(address.hasPrefix("unix:"), address)
        setenv("DBUS_SESSION_BUS_ADDRESS", address, 1)
        mock = Process()
        mock.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        mock.arguments = [
            "-m", "dbusmock", "--session", "--template", "notification_daemon", "-l", log.path,
            "--parameters", #"{"capabilities": "body body-markup actions"}"#,
        ]
        mock.standardOutput = FileHandle.nullDevice
        mock.standardError = FileHandle.nullDevice
        try mock.run()
        try waitFor("the mock to own org.freedesktop.Notifications") {
            run(
                "/usr/bin/dbus-send",
                [
                    "--session", "--print-reply", "--dest=org.freedesktop.Notifications",
                    "/org/freedesktop/Notifications", "org.freedesktop.Notifications.GetServerInformation",
                ]) == 0
        }
    }

    override func tearDown() {
        if let mock, mock.isRunning {
            kill(mock.processIdentifier, SIGCONT)
            mock.terminate()
            mock.waitUntilExit()
        }
        if let bus, bus.isRunning {
            bus.terminate()
            bus.waitUntilExit()
        }
        if let dir { try? FileManager.default.removeItem(at: dir) }
    }

    func testNotifyCallCarriesMappedFields() async throws {
        let sink = DesktopSink(style: DesktopStyle(), timeout: 5, logger: Logger(label: "test"))
        try await sink.deliver([
            event(
                "1", kind: "alert", severity: .critical, title: "Disk <full>",
                body: "a & <b>b</b>", url: "https://example.org/x")
        ])
        let line = try waitForLog { $0.contains("Notify") }
        XCTAssertTrue(
            line.contains(#"Notify "tidings" 0 "dialog-error" "Disk <full>" "a &amp; &lt;b&gt;b&lt;/b&gt;" ["default", "Open", "open", "Open"]"#), line)
        XCTAssertTrue(line.contains(#""urgency": 2"#), line)
        XCTAssertTrue(line.contains(#""category": "x-tidings.alert""#), line)
        XCTAssertTrue(line.contains(#""desktop-entry": "tidings""#), line)
        XCTAssertTrue(line.hasSuffix(" 0"), "critical never expires: \(line)")
        await sink.shutdown()
    }

    func testInfoUsesConfiguredExpiryAndNormalUrgency() async throws {
        var style = DesktopStyle()
        style.expiry = .after(8)
        let sink = DesktopSink(style: style, timeout: 5, logger: Logger(label: "test"))
        try await sink.deliver([event("1", title: "hello")])
        let line = try waitForLog { $0.contains("Notify") }
        XCTAssertTrue(line.contains(#""urgency": 1"#), line)
        XCTAssertTrue(line.contains(#" [] "#), "no URL, no actions: \(line)")
        XCTAssertTrue(line.hasSuffix(" 8000"), line)
        await sink.shutdown()
    }

    func testHungServerTimesOutInsteadOfBlocking() async throws {
        let sink = DesktopSink(style: DesktopStyle(), timeout: 1, logger: Logger(label: "test"))
        try await sink.deliver([event("0", title: "warm-up")])
        kill(mock.processIdentifier, SIGSTOP)
        var start = Date()
        await assertRetryable(sink, contains: "did not answer within 1s")
        XCTAssertLessThan(Date().timeIntervalSince(start), 4)
        start = Date()
        await assertRetryable(sink, contains: "has not answered for")
        XCTAssertLessThan(Date().timeIntervalSince(start), 1, "a stuck thread fails later deliveries at once")
        kill(mock.processIdentifier, SIGCONT)
        // The stuck call completes once the server runs again; then deliveries work.
        var delivered = false
        for _ in 0..<50 where !delivered {
            do {
                try await sink.deliver([event("2", title: "after")])
                delivered = true
            } catch {
                try await Task.sleep(nanoseconds: 200_000_000)
            }
        }
        XCTAssertTrue(delivered)
        _ = try waitForLog { $0.contains(#""after""#) }
        // The call that was in flight when the server froze completes late (D-Bus cannot recall it);
        // the one refused while the thread was stuck never reaches the server.
        let t2 = try String(contentsOf: log, encoding: .utf8).components(separatedBy: #" "t2" "#).count - 1
        XCTAssertEqual(t2, 1)
        await sink.shutdown()
    }

    func testServerGoneIsRetryable() async throws {
        mock.terminate()
        mock.waitUntilExit()
        let sink = DesktopSink(style: DesktopStyle(), timeout: 5, logger: Logger(label: "test"))
        await assertRetryable(sink, contains: "desktop notifications unavailable: ")
        await sink.shutdown()
    }

    // MARK: helpers

    func assertRetryable(_ sink: DesktopSink, contains text: String, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await sink.deliver([event("t2", title: "t2")])
            XCTFail("expected a failure", file: file, line: line)
        } catch let e as DeliveryError {
            XCTAssertEqual(e.category, .retryable, file: file, line: line)
            XCTAssertTrue(e.message.contains(text), e.message, file: file, line: line)
        } catch { XCTFail("\(error)", file: file, line: line) }
    }

    func waitForLog(_ match: (String) -> Bool) throws -> String {
        var found: String?
        try waitFor("a matching Notify call in the log") {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            found = text.split(separator: "\n").map(String.init).first(where: match)
            return found != nil
        }
        return found!
    }

    func waitFor(_ what: String, timeout: TimeInterval = 10, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return }
            usleep(50_000)
        }
        throw TimedOut(what: what)
    }

    @discardableResult
    func run(_ path: String, _ args: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}
