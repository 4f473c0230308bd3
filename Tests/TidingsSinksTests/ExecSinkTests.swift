import Foundation
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class ExecSinkTests: XCTestCase {
    var dir: URL!
    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("exec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func testStdinAndEnvironmentArriveIntact() async throws {
        let out = dir.appendingPathComponent("out").path
        let sink = ExecSink(command: [
            "/bin/sh", "-c", "cat > \"$1.json\"; printf '%s\\n%s\\n%s\\n' \"$TIDINGS_TITLE\" \"$TIDINGS_URL\" \"$TIDINGS_EVENT\" > \"$1.env\"", "sh", out,
        ])
        let e = event("01X", title: "Tøst \"quoted\" $HOME `x`", body: "line1\nline2", url: "https://x/y")
        try await sink.deliver([e])
        XCTAssertEqual(try String(contentsOfFile: out + ".json", encoding: .utf8), e.jsonLine() + "\n")
        XCTAssertEqual(try String(contentsOfFile: out + ".env", encoding: .utf8), "Tøst \"quoted\" $HOME `x`\nhttps://x/y\nnew\n")
    }

    func testNonZeroExitIsRetryableWithStderr() async {
        let sink = ExecSink(command: ["/bin/sh", "-c", "echo 'boom happened' >&2; exit 3"])
        await assertFails(sink, contains: "exited with status 3: boom happened")
    }

    func testTimeoutKillsTheCommand() async {
        let start = Date()
        let sink = ExecSink(command: ["/bin/sh", "-c", "sleep 30 & sleep 30"], timeout: 0.5)
        await assertFails(sink, contains: "timed out")
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
    }

    /// Writing a large event to a command that exits without reading stdin hits EPIPE; the
    /// SIGPIPE must not kill this process (the daemon). The huge body also must not overflow
    /// the environment (E2BIG).
    func testCommandThatIgnoresStdinIsADelivery() async throws {
        let big = String(repeating: "ä", count: 1 << 19)
        try await ExecSink(command: ["/bin/true"]).deliver([event("1", body: big)])
        let env = ExecSink.environment(for: event("1", body: big))
        XCTAssertEqual(env["TIDINGS_BODY"]?.utf8.count, ExecSink.maxVariableBytes)
    }

    func testMissingCommand() async {
        await assertFails(ExecSink(command: ["/nonexistent/cmd"]), contains: "cannot run")
    }

    func assertFails(_ sink: ExecSink, contains text: String, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await sink.deliver([event("1")])
            XCTFail("expected a failure", file: file, line: line)
        } catch let e as DeliveryError {
            XCTAssertEqual(e.category, .retryable, file: file, line: line)
            XCTAssertTrue(e.message.contains(text), e.message, file: file, line: line)
        } catch { XCTFail("\(error)", file: file, line: line) }
    }
}
