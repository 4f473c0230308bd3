import Foundation
@testable import TidingsCore
import XCTest

/// The wire shapes of the control socket (DESIGN §7): each written and read in one place.
final class ControlProtocolTests: XCTestCase {
    func testRequestRoundTripAndRefusals() throws {
        let line = ControlRequest(sources: ["a", "b"]).line()
        XCTAssertEqual(line, #"{"op":"poll","sources":["a","b"],"v":1}"#)
        XCTAssertEqual(try ControlRequest.parse(line), ControlRequest(sources: ["a", "b"]))
        XCTAssertEqual(try ControlRequest.parse(#"{"v":1,"op":"poll"}"#), ControlRequest(sources: []), "no sources: every enabled one")
        for (bad, why) in [(#"{"v":2,"op":"poll"}"#, "version 1"), (#"{"v":1,"op":"drop"}"#, "unknown op"),
                           (#"{"v":1,"op":"poll","sources":[1]}"#, "list of names"), ("[1]", "one JSON object"), ("{", "one JSON object")] {
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
        let event = Event(id: "01J", source: "s", provider: "exec", kind: "item", event: .new, key: "k", title: "T \u{1b}[31m", body: "b",
                          url: nil, severity: .warning, observedAt: Date(timeIntervalSince1970: 1_800_000_000), data: ["n": 1, "deep": ["x": [true]]])
        let replies: [ControlReply] = [.waiting, .event(event), .result(source: "s", outcome: .ok),
                                       .result(source: "t", outcome: .failed("HTTP 500")), .done, .error("no source named 'x'")]
        for r in replies { XCTAssertEqual(try ControlReply.parse(r.line()), r, r.line()) }
        XCTAssertEqual(ControlReply.event(event).line(), #"{"event":"# + event.jsonLine() + #","type":"event","v":1}"#)
        XCTAssertEqual(try JSONValue.parse(Data(ControlReply.event(event).line().utf8))["event"]?.jsonString(), event.jsonLine())
        let silenced = ControlReply.event(event, silencedBy: "k3x9m0q2ta")
        XCTAssertEqual(silenced.line(), #"{"event":"# + event.jsonLine() + #","silenced_by":"k3x9m0q2ta","type":"event","v":1}"#)
        XCTAssertEqual(try ControlReply.parse(silenced.line()), silenced)
    }

    func testRepliesOfAnotherVersionOrUnknownTypes() throws {
        XCTAssertNil(try ControlReply.parse(#"{"type":"progress","v":1}"#), "an unknown type is skipped")
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"done","v":2}"#))
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"result","source":"s","status":"maybe","v":1}"#))
        XCTAssertThrowsError(try ControlReply.parse(#"{"type":"event","event":{"id":"x"},"v":1}"#), "an unreadable event")
    }
}
