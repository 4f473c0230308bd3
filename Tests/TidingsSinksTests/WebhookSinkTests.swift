import Foundation
import Synchronization
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class WebhookSinkTests: XCTestCase {
    /// The test vector published with the Standard Webhooks reference libraries
    /// (cross-checked with Python's hmac).
    func testSignatureMatchesStandardWebhooksVector() throws {
        let sig = try WebhookSignature(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let value = sig.sign(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330, body: Data(#"{"test": 2432232314}"#.utf8))
        XCTAssertEqual(value, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        // Any change to id, timestamp or body changes the signature.
        XCTAssertNotEqual(sig.sign(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265331, body: Data(#"{"test": 2432232314}"#.utf8)), value)
    }

    func testSecretMustBeBase64() {
        XCTAssertThrowsError(try WebhookSignature(secret: "whsec_not base64!"))
        XCTAssertThrowsError(try WebhookSignature(secret: "whsec_"))
    }

    func testRequestCarriesStandardHeadersAndEventJSON() throws {
        let e = event("01A")
        let sink = WebhookSink(
            url: URL(string: "https://hooks.example/x")!, headers: [("X-Team", "ops"), ("content-type", "text/plain")],
            signature: try WebhookSignature(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            client: Recorder(statuses: []), now: { Date(timeIntervalSince1970: 1614265330) })
        let body = WebhookSink.body([e], asArray: false)
        let r = sink.request(id: e.id, body: body)
        let h = Dictionary(r.headers.map { ($0.0.lowercased(), $0.1) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(r.method, "POST")
        XCTAssertEqual(h["content-type"], "application/json")
        XCTAssertEqual(r.headers.filter { $0.0.lowercased() == "content-type" }.count, 1)
        XCTAssertEqual(h["x-team"], "ops")
        XCTAssertEqual(h["webhook-id"], "01A")
        XCTAssertEqual(h["webhook-timestamp"], "1614265330")
        XCTAssertEqual(
            h["webhook-signature"], try WebhookSignature(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").sign(id: "01A", timestamp: 1614265330, body: body))
        XCTAssertEqual(String(decoding: body, as: UTF8.self), e.jsonLine())
    }

    func testBatchIDIsStableAndDependsOnTheEvents() {
        let a = [event("01A"), event("01B")]
        XCTAssertEqual(WebhookSink.messageID(for: a), WebhookSink.messageID(for: a))
        XCTAssertNotEqual(WebhookSink.messageID(for: a), WebhookSink.messageID(for: [event("01A"), event("01C")]))
        XCTAssertEqual(WebhookSink.messageID(for: [event("01A")]), "01A")
        // The same webhook-id as earlier builds: SHA-256("01A,01B"), first 16 bytes in hex (Python's hashlib).
        XCTAssertEqual(WebhookSink.messageID(for: a), "batch_979afd2eedf116f0e9bb67c133011999")
        let arr = try? JSONSerialization.jsonObject(with: WebhookSink.body(a, asArray: true)) as? [[String: Any]]
        XCTAssertEqual(arr?.compactMap { $0["id"] as? String }, ["01A", "01B"])
    }

    func testStatusClassification() {
        let url = URL(string: "https://u:pw@hooks.example/x?token=t")!
        func cat(_ status: Int, _ headers: [String: String] = [:]) -> DeliveryError? {
            WebhookSink(url: url, client: Failing()).classify(HTTPResponse(status: status, headers: headers, body: Data()))
        }
        XCTAssertNil(cat(200))
        XCTAssertNil(cat(204))
        for s in [408, 429, 500, 502, 503] { XCTAssertEqual(cat(s)?.category, .retryable, "\(s)") }
        XCTAssertEqual(cat(429, ["retry-after": "7"])?.retryAfter, 7)
        XCTAssertEqual(cat(410)?.category, .gone)
        for s in [400, 401, 403, 404, 422] { XCTAssertEqual(cat(s)?.category, .permanent, "\(s)") }
        XCTAssertFalse(cat(500)!.message.contains("pw"))
        XCTAssertFalse(cat(500)!.message.contains("token"))
    }

    /// A redirect is never followed (a 301/302 would re-send the POST as a GET without the body)
    /// and never counts as delivered: a permanent move stops the sink until reload, as 410 does,
    /// a temporary one is retried. Both keep the delivery and name the Location.
    func testRedirectsAreNotFollowedAndNotDelivered() {
        let url = URL(string: "https://hooks.example/x?token=t")!
        XCTAssertEqual(WebhookSink(url: url, client: Failing()).request(id: "1", body: Data()).redirects, .never)
        func cat(_ status: Int, _ location: String) -> DeliveryError? {
            WebhookSink(url: url, client: Failing()).classify(HTTPResponse(status: status, headers: ["location": location], body: Data()))
        }
        for s in [301, 308] {
            XCTAssertEqual(cat(s, "https://new.example/hook")?.category, .gone, "\(s)")
            XCTAssertTrue(cat(s, "https://new.example/hook")!.message.contains("moved permanently to https://new.example/hook"), "\(s)")
        }
        for s in [302, 303, 307] {
            XCTAssertEqual(cat(s, "/elsewhere?token=t")?.category, .retryable, "\(s)")
            XCTAssertTrue(cat(s, "/elsewhere?token=t")!.message.contains("redirect to https://hooks.example/elsewhere;"), cat(s, "/elsewhere")!.message)
        }
    }

    func testNetworkErrorsAreRetryable() async {
        let sink = WebhookSink(url: URL(string: "http://127.0.0.1:9/")!, client: Failing())
        do {
            try await sink.deliver([event("01A")])
            XCTFail("expected failure")
        } catch let e as DeliveryError {
            XCTAssertEqual(e.category, .retryable)
            XCTAssertTrue(e.message.contains("timed out"), e.message)
        } catch { XCTFail("\(error)") }
    }

    func testEachEventIsPostedSeparatelyUnlessBatching() async throws {
        let r = Recorder(statuses: [200, 200, 200])
        try await WebhookSink(url: URL(string: "http://h/")!, client: r).deliver([event("1"), event("2")])
        XCTAssertEqual(r.ids, ["1", "2"])
        let b = Recorder(statuses: [200])
        try await WebhookSink(url: URL(string: "http://h/")!, batch: true, client: b).deliver([event("1"), event("2")])
        XCTAssertEqual(b.ids.count, 1)
    }
}

final class Recorder: HTTPClient, @unchecked Sendable {
    private let lock = NSLock()
    private var statuses: [Int]
    private(set) var ids: [String] = []
    init(statuses: [Int]) { self.statuses = statuses }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let status: Int = lock.withLock {
            ids.append(request.headers.first { $0.0 == "webhook-id" }?.1 ?? "")
            return statuses.isEmpty ? 500 : statuses.removeFirst()
        }
        return HTTPResponse(status: status, headers: [:], body: Data())
    }
}
