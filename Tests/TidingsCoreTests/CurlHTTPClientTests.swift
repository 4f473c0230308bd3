import Foundation
import TidingsCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A GET through `client`.
private func fetch(_ client: CurlHTTPClient, _ url: String, headers: [(String, String)] = [], timeout: TimeInterval = 10,
                   maxBody: Int = 10 << 20) async throws -> HTTPResponse {
    try await client.send(HTTPRequest(url: URL(string: url)!, headers: headers, timeout: timeout, maxBody: maxBody))
}

/// ``CurlHTTPClient`` against a real loopback server.
final class CurlHTTPClientTests: XCTestCase {
    private func assertThrows(_ expected: String, _ body: () async throws -> HTTPResponse,
                              file: StaticString = #filePath, line: UInt = #line) async {
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
            let r = try await client.send(HTTPRequest(method: method, url: URL(string: server.url)!,
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

    func testRedirectsAreFollowedKeepingOnlyTheFinalHeaders() async throws {
        let server = try LoopbackHTTPServer { r in
            switch r.target {
            case "/from": return .respond(status: 302, headers: [("Location", "/to"), ("X-First", "1")])
            case "/to": return .respond(status: 200, headers: [("X-Final", "1")], body: Data("there".utf8))
            default: return .respond(status: 301, headers: [("Location", "ftp://127.0.0.1/file")])
            }
        }
        let client = CurlHTTPClient()
        let r = try await fetch(client, server.url + "/from")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "there")
        XCTAssertEqual(r.headers["x-final"], "1")
        XCTAssertNil(r.headers["x-first"])

        // A redirect to a scheme not allowed is not followed: the caller gets the redirect itself.
        let refused = try await fetch(client, server.url + "/elsewhere")
        XCTAssertEqual(refused.status, 301)
        XCTAssertEqual(refused.header("location"), "ftp://127.0.0.1/file")
    }

    func testHTTPSRequestsNeverFollowRedirectsToHTTP() {
        XCTAssertEqual(CurlHTTPClient.redirectProtocols(for: URL(string: "https://a.example/x")!), "https")
        XCTAssertEqual(CurlHTTPClient.redirectProtocols(for: URL(string: "HTTPS://a.example/x")!), "https")
        XCTAssertEqual(CurlHTTPClient.redirectProtocols(for: URL(string: "http://a.example/x")!), "http,https")
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
