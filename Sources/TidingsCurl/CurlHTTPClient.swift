import CCurl
import FoundationEssentials
import Glibc
import TidingsPluginAPI

/// ``HTTPClient`` on a libcurl multi handle: one thread drives every transfer of this client,
/// reusing connections (at most `maxConnectionsPerHost` per host). A process makes one and
/// shares it: every provider and sink of a daemon sends through the same instance.
///
/// - Sends `User-Agent: tidings/<version>` unless the request sets one; accepts gzip/deflate.
/// - Follows redirects itself, hop by hop, as the request's ``RedirectPolicy`` allows (libcurl
///   never follows one): see ``Redirect``. A refused redirect throws
///   ``HTTPClientError/redirectRefused(_:)`` naming the target. A redirected hop under
///   ``PrivateRedirects`` connects to public addresses only, checked on each address libcurl
///   is about to connect to (`CURLOPT_OPENSOCKETFUNCTION`, on a fresh connection).
/// - A body larger than `maxBody` fails with ``HTTPClientError/bodyTooLarge(limit:)`` as soon as
///   it passes the limit (up front on `Content-Length`), without buffering the rest.
/// - `timeout` is the whole-request deadline, redirects included (``HTTPClientError/timeout(_:)``); task cancellation
///   aborts the transfer and throws `CancellationError`.
/// - Proxies come from the environment as libcurl reads them (`http_proxy`, `https_proxy`,
///   `all_proxy`, `no_proxy`; for plain http only the lower-case `http_proxy`).
/// - Transport error messages pass through ``Redactor``.
package final class CurlHTTPClient: HTTPClient {
    /// Drives HTTP requests and SMTP submissions (``CurlMailTransfer``) alike.
    let loop: CurlMultiLoop

    package init(maxConnectionsPerHost: Int = 4) {
        loop = CurlMultiLoop(maxConnectionsPerHost: maxConnectionsPerHost)
    }

    deinit { loop.stop() }

    /// Applies `max_per_host` (at start and on reload) to the transfers that start from now on.
    package func limitConnectionsPerHost(_ n: Int) { loop.limitPerHost(n) }

    /// Loads libcurl now rather than with the first request (``CurlMultiLoop/prepare()``).
    package func prepare() { loop.prepare() }

    /// Maps, relocates and initialises libcurl and the libraries it needs, without making a
    /// multi handle: thread-safe and done once per process (a later ``prepare()`` or first
    /// request waits for a load under way on another thread, then finds it done). `tidings
    /// check` runs it on a thread of its own while it reads the configuration.
    package static func loadLibrary() { _ = tidings_curl_load() }

    package func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let deadline = ContinuousClock.now + .milliseconds(Int64(min(max(request.timeout, 0), 1e9) * 1000))
        var hop = request
        var hops = 0
        /// The status of the redirect that led to `hop`.
        var redirectStatus = 0
        /// Whether redirected hops may connect only to public addresses (``PrivateRedirects``).
        var publicOnly = request.privateRedirects == .refuse
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw HTTPClientError.timeout(request.timeout) }
            hop.timeout = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            var response: HTTPResponse
            let transfer = CurlTransfer(hop, publicOnly: hops > 0 && publicOnly)
            do {
                response = try await loop.run(transfer)
                response.url = hop.url
            } catch HTTPClientError.timeout {
                throw HTTPClientError.timeout(request.timeout)
            } catch let refused as PrivateAddressRefused {
                throw HTTPClientError.redirectRefused(
                    RedirectRefusal(status: redirectStatus, target: Redirect.display(hop.url), reason: .privateAddress(refused.address)))
            }
            // Unset, the first hop decides: a public server may not lead into a private network.
            if hops == 0 && request.privateRedirects == .auto {
                publicOnly = transfer.connectedAddress.map { !PrivateAddress.isPrivate($0) } ?? true
            }
            do {
                guard let next = try Redirect.next(after: response, to: hop, first: request, hops: hops) else { return response }
                hop = next
                hops += 1
                redirectStatus = response.status
            } catch let refusal as RedirectRefusal {
                throw HTTPClientError.redirectRefused(refusal)
            }
        }
    }
}
