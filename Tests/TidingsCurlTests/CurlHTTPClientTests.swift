import Foundation
import TidingsCurl
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

#if canImport(Glibc)
    import Glibc
#endif

/// A GET through `client`.
private func fetch(
    _ client: CurlHTTPClient, _ url: String, headers: [(String, String)] = [], timeout: TimeInterval = 10,
    maxBody: Int = 10 << 20
) async throws -> HTTPResponse {
    try await client.send(HTTPRequest(url: URL(string: url)!, headers: headers, timeout: timeout, maxBody: maxBody))
}

/// ``CurlHTTPClient`` against a real loopback server.
final class CurlHTTPClientTests: XCTestCase {
    private func assertThrows(
        _ expected: String, _ body: () async throws -> HTTPResponse,
        file: StaticString = #filePath, line: UInt = #line
    ) async {
        do {
            let r = try await body()
            XCTFail("expected \(expected), got HTTP \(r.status)", file: file, line: line)
        } catch {
            XCTAssertEqual(Self.kind(error), expected, "\(error)", file: file, line: line)
        }
    }

    private static func kind(_ error: Error) -> String {
        switch error {
        case is CancellationError: return "cancelled"
        case HTTPClientError.timeout: return "timeout"
        case HTTPClientError.bodyTooLarge: return "bodyTooLarge"
        case HTTPClientError.transport: return "transport"
        default: return "\(error)"
        }
    }

    func testStatusHeadersBodyAndDefaultRequestHeaders() async throws {
        let server = try LoopbackHTTPServer { _ in
            .respond(status: 201, headers: [("X-Thing", "one"), ("X-Thing", "two"), ("Content-Type", "text/plain")], body: Data("hello".utf8))
        }
        let client = CurlHTTPClient()
        let r = try await fetch(client, server.url + "/a?b=c", headers: [("X-Mine", "yes")])
        XCTAssertEqual(r.status, 201)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "hello")
        XCTAssertEqual(r.header("Content-Type"), "text/plain")
        XCTAssertEqual(r.headers["x-thing"], "one, two")
        XCTAssertEqual(r.headers["content-length"], "5")
        let seen = try XCTUnwrap(server.requests.first)
        XCTAssertEqual(seen.method, "GET")
        XCTAssertEqual(seen.target, "/a?b=c")
        XCTAssertEqual(seen.headers["user-agent"], "tidings/\(TidingsVersion.string)")
        XCTAssertEqual(seen.headers["x-mine"], "yes")
        XCTAssertTrue(seen.headers["accept-encoding"]?.contains("gzip") == true, "\(seen.headers)")

        _ = try await fetch(client, server.url, headers: [("user-agent", "custom/1")])
        XCTAssertEqual(server.requests.last?.headers["user-agent"], "custom/1")
    }

    func testMethodsAndBodies() async throws {
        let server = try LoopbackHTTPServer { r in .respond(status: 200, body: r.body) }
        let client = CurlHTTPClient()
        for method in ["POST", "PUT", "GET"] {
            let r = try await client.send(
                HTTPRequest(
                    method: method, url: URL(string: server.url)!,
                    headers: [("Content-Type", "application/json")], body: Data(#"{"a":1}"#.utf8)))
            XCTAssertEqual(String(decoding: r.body, as: UTF8.self), #"{"a":1}"#)
            XCTAssertEqual(server.requests.last?.method, method)
            XCTAssertEqual(server.requests.last?.headers["content-type"], "application/json")
            XCTAssertNil(server.requests.last?.headers["expect"])
        }
        _ = try await client.send(HTTPRequest(method: "POST", url: URL(string: server.url)!))
        XCTAssertEqual(server.requests.last?.method, "POST")
        XCTAssertEqual(server.requests.last?.headers["content-length"], "0")
        _ = try await client.send(HTTPRequest(method: "DELETE", url: URL(string: server.url)!))
        XCTAssertEqual(server.requests.last?.method, "DELETE")
        let head = try await client.send(HTTPRequest(method: "HEAD", url: URL(string: server.url)!))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(server.requests.last?.method, "HEAD")
    }

    func testETagAndNotModified() async throws {
        let server = try LoopbackHTTPServer { r in
            r.headers["if-none-match"] == "\"v1\""
                ? .respond(status: 304, headers: [("ETag", "\"v1\"")])
                : .respond(status: 200, headers: [("ETag", "\"v1\"")], body: Data("{}".utf8))
        }
        let client = CurlHTTPClient()
        let first = try await fetch(client, server.url)
        XCTAssertEqual(first.status, 200)
        let etag = try XCTUnwrap(first.header("etag"))
        let second = try await fetch(client, server.url, headers: [("If-None-Match", etag)])
        XCTAssertEqual(second.status, 304)
        XCTAssertEqual(second.body.count, 0)
    }

    func testBodyOverLimitFailsWithContentLengthChunkedAndEndless() async throws {
        let big = Data(repeating: 0x61, count: 5000)
        let server = try LoopbackHTTPServer { r in
            switch r.target {
            case "/length": return .respond(status: 200, body: big)
            case "/chunked": return .respond(status: 200, body: big, chunked: true)
            case "/endless": return .endless
            default: return .respond(status: 200, body: Data(repeating: 0x61, count: 4000), chunked: true)
            }
        }
        let client = CurlHTTPClient()
        await assertThrows("bodyTooLarge") { try await fetch(client, server.url + "/length", maxBody: 4000) }
        await assertThrows("bodyTooLarge") { try await fetch(client, server.url + "/chunked", maxBody: 4000) }
        await assertThrows("bodyTooLarge") { try await fetch(client, server.url + "/endless", timeout: 5, maxBody: 100_000) }
        let exact = try await fetch(client, server.url + "/exact", maxBody: 4000)
        XCTAssertEqual(exact.body.count, 4000)
    }

    func testTimeoutOnAServerThatNeverAnswers() async throws {
        let server = try LoopbackHTTPServer { _ in .never }
        defer { server.stop() }
        let client = CurlHTTPClient()
        let start = Date()
        do {
            _ = try await fetch(client, server.url, timeout: 0.5)
            XCTFail("expected a timeout")
        } catch HTTPClientError.timeout(let t) {
            XCTAssertEqual(t, 0.5)
            XCTAssertEqual(HTTPClientError.timeout(t).description, "timed out after \(DurationParser.format(0.5))")
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 3)
    }

    func testCancellationAbortsTheTransferAndTheClientStaysUsable() async throws {
        let server = try LoopbackHTTPServer { r in r.target == "/hang" ? .never : .respond(status: 200) }
        defer { server.stop() }
        let client = CurlHTTPClient()
        let task = Task { try await fetch(client, server.url + "/hang", timeout: 30) }
        try await Task.sleep(for: .milliseconds(300))
        let start = Date()
        task.cancel()
        await assertThrows("cancelled") { try await task.value }
        XCTAssertLessThan(Date().timeIntervalSince(start), 2)

        // Already cancelled before sending.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fetch(client, server.url + "/hang")
        }
        await assertThrows("cancelled") { try await early.value }

        let ok = try await fetch(client, server.url + "/ok")
        XCTAssertEqual(ok.status, 200)
    }

    // MARK: redirects (followed by the client under the request's policy, never by libcurl)

    private func send(
        _ client: CurlHTTPClient, _ url: String, method: String = "GET", headers: [(String, String)] = [],
        body: Data? = nil, redirects: RedirectPolicy
    ) async throws -> HTTPResponse {
        try await client.send(HTTPRequest(method: method, url: URL(string: url)!, headers: headers, body: body, timeout: 10, redirects: redirects))
    }

    private func refusal(_ body: () async throws -> HTTPResponse, file: StaticString = #filePath, line: UInt = #line) async -> RedirectRefusal? {
        do {
            let r = try await body()
            XCTFail("expected a refused redirect, got HTTP \(r.status)", file: file, line: line)
        } catch HTTPClientError.redirectRefused(let refusal) {
            return refusal
        } catch {
            XCTFail("expected a refused redirect, got \(error)", file: file, line: line)
        }
        return nil
    }

    func testSameOriginRedirectsAreFollowedKeepingOnlyTheFinalHeaders() async throws {
        let server = try LoopbackHTTPServer { r in
            switch r.target {
            case "/from": return .respond(status: 302, headers: [("Location", "/to"), ("X-First", "1")])
            case "/to": return .respond(status: 200, headers: [("X-Final", "1")], body: Data("there:\(r.headers["authorization"] ?? "")".utf8))
            default: return .respond(status: 404)
            }
        }
        let client = CurlHTTPClient()
        for policy in [RedirectPolicy.sameOrigin, .anyOrigin] {
            let r = try await send(client, server.url + "/from", headers: [("Authorization", "Bearer tok")], redirects: policy)
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "there:Bearer tok", "credentials go along on the same origin")
            XCTAssertEqual(r.headers["x-final"], "1")
            XCTAssertNil(r.headers["x-first"])
        }
    }

    func testCredentialRequestsAreNeverRedirectedToAnotherOrigin() async throws {
        let other = try LoopbackHTTPServer { _ in .respond(status: 200, body: Data("stolen".utf8)) }
        let server = try LoopbackHTTPServer { r in
            switch r.target {
            case "/307": return .respond(status: 307, headers: [("Location", other.url + "/steal?x=1")])
            case "/host": return .respond(status: 302, headers: [("Location", "http://localhost:\(r.headers["host"]!.split(separator: ":")[1])/same-port")])
            default: return .respond(status: 301, headers: [("Location", "https://127.0.0.1:1/")])
            }
        }
        let client = CurlHTTPClient()
        let body = Data(#"{"epost":"a@b","losen":"pw"}"#.utf8)
        let r = await refusal {
            try await send(client, server.url + "/307", method: "POST", headers: [("Authorization", "Bearer tok")], body: body, redirects: .sameOrigin)
        }
        XCTAssertEqual(r?.status, 307)
        XCTAssertEqual(r?.target, other.url + "/steal?x=1")
        XCTAssertEqual(r?.reason, .otherOrigin(allowed: Origin(URL(string: server.url)!)!))
        XCTAssertTrue(r?.description.contains(other.url + "/steal") == true, r?.description ?? "")
        // Another host name for the same address, or another scheme, is another origin too.
        let host = await refusal { try await send(client, server.url + "/host", redirects: .sameOrigin) }
        XCTAssertEqual(host?.reason, .otherOrigin(allowed: Origin(URL(string: server.url)!)!))
        let scheme = await refusal { try await send(client, server.url + "/scheme", redirects: .sameOrigin) }
        XCTAssertEqual(scheme?.target, "https://127.0.0.1:1/")
        XCTAssertEqual(other.requests.count, 0, "nothing reached the other origin")
    }

    func testPublicRequestsFollowAnotherOriginWithoutCredentialHeaders() async throws {
        let other = try LoopbackHTTPServer { _ in .respond(status: 200, body: Data("moved here".utf8)) }
        let server = try LoopbackHTTPServer { _ in .respond(status: 301, headers: [("Location", other.url + "/new")]) }
        let r = try await send(
            CurlHTTPClient(), server.url + "/old", headers: [("Authorization", "Bearer x"), ("Cookie", "a=b"), ("Accept", "application/json")],
            redirects: .anyOrigin)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "moved here")
        let seen = try XCTUnwrap(other.requests.first)
        XCTAssertEqual(seen.target, "/new")
        XCTAssertNil(seen.headers["authorization"])
        XCTAssertNil(seen.headers["cookie"])
        XCTAssertEqual(seen.headers["accept"], "application/json")
    }

    func testNeverPolicyReturnsTheRedirectItself() async throws {
        let other = try LoopbackHTTPServer { _ in .respond(status: 200) }
        let server = try LoopbackHTTPServer { _ in .respond(status: 308, headers: [("Location", other.url + "/hook")], body: Data("moved".utf8)) }
        let r = try await send(CurlHTTPClient(), server.url + "/hook", method: "POST", body: Data("{}".utf8), redirects: .never)
        XCTAssertEqual(r.status, 308)
        XCTAssertEqual(r.header("location"), other.url + "/hook")
        XCTAssertEqual(other.requests.count, 0)
    }

    func testMethodAndBodyFollowTheStatus() async throws {
        let server = try LoopbackHTTPServer { r in
            if r.target.hasPrefix("/to") { return .respond(status: 200) }
            return .respond(status: Int(r.target.dropFirst())!, headers: [("Location", "/to")])
        }
        let client = CurlHTTPClient()
        let body = Data(#"{"a":1}"#.utf8)
        let json = [("Content-Type", "application/json")]
        // (status, method sent) → method and body that arrive at /to
        let cases: [(Int, String, String, Bool)] = [
            (301, "POST", "GET", false), (302, "POST", "GET", false), (303, "POST", "GET", false), (303, "PUT", "GET", false),
            (307, "POST", "POST", true), (308, "POST", "POST", true), (308, "PUT", "PUT", true),
            (302, "GET", "GET", true),  // a GET with a body (Sportdate's spec) keeps it
        ]
        for (status, method, expected, keepsBody) in cases {
            _ = try await send(client, server.url + "/\(status)", method: method, headers: json, body: body, redirects: .sameOrigin)
            let seen = try XCTUnwrap(server.requests.last)
            XCTAssertEqual(seen.target, "/to")
            XCTAssertEqual(seen.method, expected, "\(status) \(method)")
            XCTAssertEqual(seen.body, keepsBody ? body : Data(), "\(status) \(method)")
            XCTAssertEqual(seen.headers["content-type"], keepsBody ? "application/json" : nil, "\(status) \(method)")
        }
    }

    func testRedirectLoopsStopAfterTheHopLimit() async throws {
        let server = try LoopbackHTTPServer { r in .respond(status: 302, headers: [("Location", r.target == "/a" ? "/b" : "/a")]) }
        let r = await refusal { try await send(CurlHTTPClient(), server.url + "/a", redirects: .anyOrigin) }
        XCTAssertEqual(r?.reason, .tooMany)
        XCTAssertEqual(server.requests.count, Redirect.maxHops + 1)
    }

    /// The rules without a server: schemes, https → http, unusable locations.
    func testRedirectRulesWithoutTheWire() throws {
        func next(_ from: String, _ status: Int, _ location: String?, _ policy: RedirectPolicy) throws -> HTTPRequest? {
            let request = HTTPRequest(url: URL(string: from)!, redirects: policy)
            let response = HTTPResponse(status: status, headers: location.map { ["location": $0] } ?? [:], body: Data())
            return try Redirect.next(after: response, to: request, first: request, hops: 0)
        }
        func reason(_ body: () throws -> HTTPRequest?) -> RedirectRefusal.Reason? {
            do { _ = try body() } catch let r as RedirectRefusal { return r.reason } catch {}
            return nil
        }
        XCTAssertEqual(reason { try next("https://a.example/x", 302, "http://a.example/y", .anyOrigin) }, .downgrade)
        XCTAssertEqual(reason { try next("http://a.example/x", 302, "ftp://a.example/y", .anyOrigin) }, .scheme)
        XCTAssertEqual(reason { try next("http://a.example/x", 302, "http://[::1", .anyOrigin) }, .invalidLocation)
        XCTAssertEqual(Redirect.display("http://[\u{1B}[2J"), "http://[%1B[2J", "a Location is shown without terminal escapes")
        XCTAssertEqual(try next("http://a.example/x", 302, "https://b.example/y", .anyOrigin)?.url.absoluteString, "https://b.example/y")
        XCTAssertEqual(try next("https://a.example/x", 302, "//A.EXAMPLE:443/y", .sameOrigin)?.url.absoluteString, "https://A.EXAMPLE:443/y")
        XCTAssertEqual(
            reason { try next("http://127.0.0.1:8080/x", 302, "http://0.0.0.0:8080/y", .sameOrigin) },
            .otherOrigin(allowed: Origin(URL(string: "http://127.0.0.1:8080")!)!))
        XCTAssertNil(try next("http://a.example/x", 302, "http://b.example/", .never))
        XCTAssertNil(try next("http://a.example/x", 304, "http://b.example/", .anyOrigin), "not a redirect")
        XCTAssertNil(try next("http://a.example/x", 302, nil, .anyOrigin), "no Location: the answer")
        // The origin a user info or a default port does not change.
        XCTAssertEqual(Origin(URL(string: "https://u:p@A.example/x")!), Origin(URL(string: "https://a.example:443/")!))
        XCTAssertEqual(Origin(URL(string: "http://[::1]:8080/")!)?.description, "http://[::1]:8080")
    }

    func testManyConcurrentRequestsCompleteOverFewReusedConnections() async throws {
        let server = try LoopbackHTTPServer { r in .respond(status: 200, body: Data(r.target.utf8)) }
        let client = CurlHTTPClient(maxConnectionsPerHost: 4)
        let count = 500
        let bodies = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for i in 0..<count {
                group.addTask { (i, String(decoding: try await fetch(client, server.url + "/\(i)").body, as: UTF8.self)) }
            }
            var out: [Int: String] = [:]
            for try await (i, body) in group { out[i] = body }
            return out
        }
        XCTAssertEqual(bodies.count, count)
        XCTAssertTrue(bodies.allSatisfy { $0.value == "/\($0.key)" })
        XCTAssertEqual(server.requests.count, count)
        XCTAssertLessThanOrEqual(server.connections, 4)

        // Sequential requests reuse one connection.
        let before = server.connections
        for _ in 0..<20 { _ = try await fetch(client, server.url + "/again") }
        XCTAssertEqual(server.connections, before)
    }

    /// `tidings check` loads libcurl and makes the multi handle before the configuration's
    /// `max_per_host` reaches the client: the limit set after ``CurlHTTPClient/prepare()`` holds.
    func testAConnectionLimitSetAfterPrepareHolds() async throws {
        let server = try LoopbackHTTPServer { r in .respond(status: 200, body: Data(r.target.utf8)) }
        let client = CurlHTTPClient(maxConnectionsPerHost: 8)
        client.prepare()
        client.limitConnectionsPerHost(1)
        let count = 40
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<count { group.addTask { String(decoding: try await fetch(client, server.url + "/\(i)").body, as: UTF8.self) } }
            var out: [String] = []
            for try await body in group { out.append(body) }
            return out
        }
        XCTAssertEqual(bodies.count, count)
        XCTAssertEqual(server.connections, 1, "the limit set after prepare() was ignored")
    }

    func testTransportErrorsAreRedacted() async throws {
        Redactor.shared.register("sekrit-host-name")
        let client = CurlHTTPClient()
        do {
            _ = try await fetch(client, "http://sekrit-host-name.invalid/", timeout: 10)
            XCTFail("expected an error")
        } catch {
            XCTAssertFalse("\(error)".contains("sekrit-host-name"), "\(error)")
            XCTAssertTrue("\(error)".contains("‹redacted›") || Self.kind(error) == "timeout", "\(error)")
        }
        // Connection refused: a port nobody listens on.
        let server = try LoopbackHTTPServer { _ in .respond(status: 200) }
        let port = server.port
        server.stop()
        await assertThrows("transport") { try await fetch(client, "http://127.0.0.1:\(port)/") }
    }

    func testProxyFromTheEnvironment() async throws {
        let proxy = try LoopbackHTTPServer { _ in .respond(status: 200, body: Data("via proxy".utf8)) }
        let saved: [(String, String?)] = ["http_proxy", "no_proxy", "NO_PROXY"].map { name in (name, ProcessInfo.processInfo.environment[name]) }
        setenv("http_proxy", proxy.url, 1)
        unsetenv("no_proxy")
        unsetenv("NO_PROXY")
        defer {
            for (name, value) in saved {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }
        let r = try await fetch(CurlHTTPClient(), "http://tidings-proxy-test.invalid/x")
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "via proxy")
        XCTAssertEqual(proxy.requests.first?.target, "http://tidings-proxy-test.invalid/x")
    }
}
