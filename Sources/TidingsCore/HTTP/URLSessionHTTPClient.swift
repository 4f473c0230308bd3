import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// ``HTTPClient`` on Foundation's URLSession (libcurl on Linux: honours `http_proxy`,
/// `https_proxy`, `no_proxy`). One session is shared so connections are reused.
///
/// Bodies are streamed through a delegate so an oversized response is cancelled as soon
/// as it passes `maxBody`, instead of being buffered whole.
public final class URLSessionHTTPClient: HTTPClient, @unchecked Sendable {
    private let session: URLSession
    private let delegate: Delegate

    public init(maxConnectionsPerHost: Int = 4) {
        let config = URLSessionConfiguration.ephemeral
        config.httpMaximumConnectionsPerHost = maxConnectionsPerHost
        config.requestCachePolicy = .reloadIgnoringLocalCacheData
        config.urlCache = nil
        config.httpCookieStorage = nil
        config.httpShouldSetCookies = false
        delegate = Delegate()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: config, delegate: delegate, delegateQueue: queue)
    }

    deinit { session.invalidateAndCancel() }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var r = URLRequest(url: request.url, timeoutInterval: request.timeout)
        r.httpMethod = request.method
        for (k, v) in request.headers { r.addValue(v, forHTTPHeaderField: k) }
        if r.value(forHTTPHeaderField: "User-Agent") == nil { r.setValue("tidings/\(TidingsVersion.string)", forHTTPHeaderField: "User-Agent") }
        r.httpBody = request.body
        let task = session.dataTask(with: r)
        let limit = request.maxBody
        let timeout = request.timeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<HTTPResponse, Error>) in
                delegate.register(task, state: .init(limit: limit, timeout: timeout, continuation: c))
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    final class Delegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
        struct State {
            var limit: Int
            var timeout: TimeInterval
            var continuation: CheckedContinuation<HTTPResponse, Error>
            var response: HTTPURLResponse? = nil
            var body = Data()
            var failure: Error? = nil
        }
        private let states = Mutex<[Int: State]>([:])

        func register(_ task: URLSessionTask, state: State) {
            states.withLock { $0[task.taskIdentifier] = state }
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            let allow: Bool = states.withLock { all in
                guard var s = all[dataTask.taskIdentifier] else { return false }
                s.response = response as? HTTPURLResponse
                if response.expectedContentLength > Int64(s.limit) {
                    s.failure = HTTPClientError.bodyTooLarge(limit: s.limit)
                    all[dataTask.taskIdentifier] = s
                    return false
                }
                all[dataTask.taskIdentifier] = s
                return true
            }
            completionHandler(allow ? .allow : .cancel)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let tooBig: Bool = states.withLock { all in
                guard var s = all[dataTask.taskIdentifier] else { return false }
                if s.body.count + data.count > s.limit {
                    s.failure = HTTPClientError.bodyTooLarge(limit: s.limit)
                    all[dataTask.taskIdentifier] = s
                    return true
                }
                s.body.append(data)
                all[dataTask.taskIdentifier] = s
                return false
            }
            if tooBig { dataTask.cancel() }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
            guard let s = states.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
            if let failure = s.failure {
                s.continuation.resume(throwing: failure)
            } else if let error {
                let ns = error as NSError
                if ns.domain == NSURLErrorDomain && ns.code == NSURLErrorTimedOut {
                    s.continuation.resume(throwing: HTTPClientError.timeout(s.timeout))
                } else if ns.domain == NSURLErrorDomain && ns.code == NSURLErrorCancelled {
                    s.continuation.resume(throwing: CancellationError())
                } else {
                    s.continuation.resume(throwing: HTTPClientError.transport(Redactor.shared.scrub(ns.localizedDescription)))
                }
            } else if let r = s.response {
                var headers: [String: String] = [:]
                for (k, v) in r.allHeaderFields {
                    if let k = k as? String, let v = v as? String { headers[k.lowercased()] = v }
                }
                s.continuation.resume(returning: HTTPResponse(status: r.statusCode, headers: headers, body: s.body))
            } else {
                s.continuation.resume(throwing: HTTPClientError.transport("no response"))
            }
        }

        // Redirects: follow (URLSession default), but never across schemes downgrading https→http.
        func urlSession(
            _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
            newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
        ) {
            if task.originalRequest?.url?.scheme == "https" && request.url?.scheme != "https" {
                completionHandler(nil)
            } else {
                completionHandler(request)
            }
        }
    }
}
