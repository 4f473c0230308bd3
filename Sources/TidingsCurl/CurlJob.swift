import CCurl
import FoundationEssentials
import Glibc

/// One transfer a ``CurlMultiLoop`` drives: an HTTP request (``CurlTransfer``) or an SMTP
/// submission (``CurlMailTransfer``), and the task that waits for its result.
///
/// Once submitted, a job is touched only on the loop thread (libcurl calls its callbacks inside
/// `curl_multi_perform` there), except ``markCancelled()``; conforming classes are
/// `@unchecked Sendable` by that discipline.
protocol CurlJob: AnyObject, Sendable {
    associatedtype Output: Sendable
    /// Resumed exactly once, by ``complete(_:)``.
    var continuation: CheckedContinuation<Output, Error>? { get set }
    /// The easy handle serving this job, once ``configure(_:)`` ran.
    var handle: UnsafeMutableRawPointer? { get }
    /// Set by task cancellation (any thread); the loop checks it when it picks the job up.
    var isCancelled: Bool { get }
    func markCancelled()
    /// Sets every option of `handle` (fresh or `curl_easy_reset`) for this job.
    func configure(_ handle: UnsafeMutableRawPointer)
    /// What the waiting task gets, once libcurl is done with the transfer.
    func outcome(_ code: CURLcode) -> Result<Output, Error>
    /// A `CURLOPT_CONNECT_ONLY` job: once it succeeded, its handle stays in the multi handle with
    /// its connection open (for ``CurlMultiLoop/onLoop(_:)``) until the loop stops.
    var keepsConnection: Bool { get }
}

extension CurlJob {
    var keepsConnection: Bool { false }
}

extension CurlJob {
    /// Resumes the waiting task (once; later calls do nothing).
    func complete(_ result: Result<Output, Error>) {
        guard let c = continuation else { return }
        continuation = nil
        c.resume(with: result)
    }

    func fail(_ error: Error) { complete(.failure(error)) }

    /// libcurl finished the transfer with `code`: the outcome is read (it may query the handle),
    /// then `release` resets the handle, then the waiting task resumes.
    func finish(_ code: CURLcode, release: () -> Void) {
        let result = outcome(code)
        release()
        complete(result)
    }
}

/// libcurl's `CURLOPT_ERRORBUFFER` for one job: the detailed message of a failed transfer.
final class CurlErrorBuffer {
    let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    init() { pointer[0] = 0 }
    deinit { pointer.deallocate() }

    /// libcurl's detailed message, else its generic text for `code`.
    package func message(_ code: CURLcode) -> String {
        pointer[0] != 0 ? String(cString: pointer) : String(cString: tidings_curl_easy_strerror(code))
    }
}
