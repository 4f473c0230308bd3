import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsIPC
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The wire shapes of the control socket (DESIGN §7): each written and read in one place.
final class ControlProtocolTests: XCTestCase {
    func testRequestRoundTripAndRefusals() throws {
        let line = ControlRequest(sources: ["a", "b"]).line()
        XCTAssertEqual(line, #"{"op":"poll","sources":["a","b"],"v":1}"#)
        XCTAssertEqual(try ControlRequest.parse(line), ControlRequest(sources: ["a", "b"]))
        XCTAssertEqual(try ControlRequest.parse(#"{"v":1,"op":"poll"}"#), ControlRequest(sources: []), "no sources: every enabled one")
        for (bad, why) in [
            (#"{"v":2,"op":"poll"}"#, "version 1"), (#"{"v":1,"op":"drop"}"#, "unknown op"),
            (#"{"v":1,"op":"poll","sources":[1]}"#, "list of names"), ("[1]", "one JSON object"), ("{", "one JSON object"),
        ] {
            XCTAssertThrowsError(try ControlRequest.parse(bad), bad) { XCTAssertTrue("\($0)".contains(why), "\(bad): \($0)") }
        }
    }

    /// `tidings check a a a` polls `a` once: a source named again is the same request, also from
    /// a client that sent the names as given.
    func testRequestNamesEachSourceOnceInTheOrderOfFirstMention() throws {
        XCTAssertEqual(try ControlRequest.parse(#"{"v":1,"op":"poll","sources":["b","a","b","a","b"]}"#).sources, ["b", "a"])
        XCTAssertEqual(ControlRequest(sources: ["a", "a", "a"]).line(), #"{"op":"poll","sources":["a"],"v":1}"#)
    }

    func testRepliesRoundTripWithTheEventJSONVerbatim() throws {
        let event = Event(
            id: "01J", source: "s", provider: "exec", kind: "item", event: .new, key: "k", title: "T \u{1b}[31m", body: "b",
            url: nil, severity: .warning, observedAt: Date(timeIntervalSince1970: 1_800_000_000), data: ["n": 1, "deep": ["x": [true]]])
        let replies: [ControlReply] = [
            .waiting, .event(event), .result(source: "s", outcome: .ok),
            .result(source: "t", outcome: .failed("HTTP 500")), .done, .error("no source named 'x'"),
        ]
        for r in replies { XCTAssertEqual(try ControlReply.parse(r.line()), r, r.line()) }
        XCTAssertEqual(ControlReply.event(event).line(), #"{"event":"# + event.jsonLine() + #","type":"event","v":1}"#)
        XCTAssertEqual(try JSONValue.parse(Data(ControlReply.event(event).line().utf8))["event"]?.jsonString(), event.jsonLine())
        let silenced = ControlReply.event(event, silencedBy: "k3x9m0q2ta")
        XCTAssertEqual(silenced.line(), #"{"event":"# + event.jsonLine() + #","silenced_by":"k3x9m0q2ta","type":"event","v":1}"#)
        XCTAssertEqual(try ControlReply.parse(silenced.line()), silenced)
    }

    /// "Busy" is an `error` with `retry`: a client that does not know it still reads a refusal.
    func testBusyIsAnErrorThatMayBeRetried() throws {
        let busy = ControlReply.busy("the daemon is serving 16 connections")
        XCTAssertEqual(busy.line(), #"{"message":"the daemon is serving 16 connections","retry":true,"type":"error","v":1}"#)
        XCTAssertEqual(try ControlReply.parse(busy.line()), busy)
        XCTAssertEqual(try ControlReply.parse(#"{"message":"m","retry":false,"type":"error","v":1}"#), .error("m"))
    }

    /// A daemon at its limit may close a connection before it has read the request: the client
    /// takes the hang-up for "busy" (and asks again), whether its write got EPIPE or its read
    /// ECONNRESET, whichever the timing gives.
    func testAHangUpBeforeAnyAnswerIsBusy() async throws {
        let path = try scratchDirectory() + "/tidings.sock"
        let listener = try UnixSocket.listen(path: path, backlog: 4)
        defer { listener.close() }
        for pause in [0, 200] {
            let client = try XCTUnwrap(try ControlClient.connect(path: path))
            let connection = try XCTUnwrap(try listener.accept(timeout: 5))
            let answer = Task { await client.ask(ControlRequest(sources: ["a"]), limit: 10) }
            try await Task.sleep(for: .milliseconds(pause))  // 0: before the request comes; 200: after, unread
            connection.close()
            guard case .busy = await answer.value else { return XCTFail("pause \(pause): \(await answer.value)") }
        }
    }

    func testRepliesOfAnotherVersionOrUnknownTypes() throws {
        XCTAssertNil(try ControlReply.parse(#"{"type":"progress","v":1}"#), "an unknown type is skipped")
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"done","v":2}"#))
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"result","source":"s","status":"maybe","v":1}"#))
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"event","event":{"id":"x"},"v":1}"#), "an unreadable event")
    }
}
