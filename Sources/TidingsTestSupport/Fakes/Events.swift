import Foundation
import TidingsPluginAPI

/// An event with fixed defaults and a fixed time, for tests of what is done with events.
package func event(
    _ id: String, source: String = "src", kind: String = "message", severity: Severity = .info,
    title: String = "t", body: String = "", url: String? = nil, type: EventType = .new
) -> Event {
    Event(
        id: id, source: source, provider: "p", kind: kind, event: type, key: "k\(id)", title: title, body: body,
        url: url, severity: severity, observedAt: Date(timeIntervalSince1970: 1_700_000_000))
}

/// An HTTP client whose every request times out.
package struct Failing: HTTPClient {
    package init() {}
    package func send(_ request: HTTPRequest) async throws -> HTTPResponse { throw HTTPClientError.timeout(15) }
}
