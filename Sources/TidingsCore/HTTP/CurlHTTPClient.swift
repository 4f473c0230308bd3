import Foundation

/// ``HTTPClient`` on a libcurl multi handle: one thread drives every transfer of this client,
/// reusing connections (at most `maxConnectionsPerHost` per host).
///
/// - Sends `User-Agent: tidings/<version>` unless the request sets one; accepts gzip/deflate.
/// - Follows redirects, but an https request never follows one to http (the redirect response
///   itself is returned instead).
/// - A body larger than `maxBody` fails with ``HTTPClientError/bodyTooLarge(limit:)`` as soon as
///   it passes the limit (up front on `Content-Length`), without buffering the rest.
/// - `timeout` is the whole-request deadline (``HTTPClientError/timeout(_:)``); task cancellation
///   aborts the transfer and throws `CancellationError`.
/// - Proxies come from the environment as libcurl reads them (`http_proxy`, `https_proxy`,
///   `all_proxy`, `no_proxy`; for plain http only the lower-case `http_proxy`).
/// - Transport error messages pass through ``Redactor``.
public final class CurlHTTPClient: HTTPClient {
    private let loop: CurlMultiLoop

    public init(maxConnectionsPerHost: Int = 4) {
        loop = CurlMultiLoop(maxConnectionsPerHost: maxConnectionsPerHost)
    }

    deinit { loop.stop() }

    /// The schemes a request may be redirected to (libcurl's `CURLOPT_REDIR_PROTOCOLS_STR`):
    /// an https request follows https redirects only.
    public static func redirectProtocols(for url: URL) -> String {
        url.scheme?.lowercased() == "https" ? "https" : "http,https"
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try Task.checkCancellation()
        let transfer = CurlTransfer(request)
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HTTPResponse, Error>) in
                transfer.continuation = c
                loop.submit(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }
}
