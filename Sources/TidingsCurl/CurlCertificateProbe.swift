import CCurl
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// ``CertificateProbe`` on the same libcurl multi loop (and thread) as HTTP and SMTP: the
/// OpenSSL backend libcurl links does the handshake and reports the chain (`CURLOPT_CERTINFO`).
extension CurlHTTPClient: CertificateProbe {
    package func certificates(_ request: CertificateRequest) async throws -> PeerCertificates {
        try await loop.run(CurlCertificateTransfer(request))
    }
}

/// One handshake on a ``CurlMultiLoop``: `CURLOPT_CONNECT_ONLY` stops libcurl once the
/// connection is set up (for `smtp://` and `imap://` that includes the greeting, EHLO or
/// CAPABILITY and STARTTLS), so no request is sent; `CURLOPT_FORBID_REUSE` closes it when the
/// transfer is done (libcurl 7.88 hangs up without QUIT or LOGOUT).
///
/// Bounds: the handshake is under `timeout`; OpenSSL refuses a certificate list over 100 KiB;
/// at most ``maxCertificates`` certificates and ``maxFieldBytes`` per field are copied.
final class CurlCertificateTransfer: CurlJob, @unchecked Sendable {
    let request: CertificateRequest
    private let cancelled = Atomic<Bool>(false)
    var continuation: CheckedContinuation<PeerCertificates, Error>?

    private(set) var handle: UnsafeMutableRawPointer?
    private let errorBuffer = CurlErrorBuffer()

    static let maxCertificates = 16
    static let maxFieldBytes = 64 << 10

    init(_ request: CertificateRequest) {
        self.request = request
    }

    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    func markCancelled() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    func configure(_ handle: UnsafeMutableRawPointer) {
        self.handle = handle
        let r = request
        tidings_curl_easy_setopt_str(handle, CURLOPT_URL, r.endpoint.absoluteString)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PROTOCOLS_STR, "https,smtp,imap")
        tidings_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        tidings_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(min(max(r.timeout, 0.001), 1e9) * 1000))
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer.pointer)
        tidings_curl_easy_setopt_long(handle, CURLOPT_CONNECT_ONLY, 1)
        tidings_curl_easy_setopt_long(handle, CURLOPT_FORBID_REUSE, 1)
        tidings_curl_easy_setopt_long(handle, CURLOPT_CERTINFO, 1)
        // A resumed TLS session could show the certificate of an earlier handshake, not the
        // one the server has now (a renewal): every check is a full handshake.
        tidings_curl_easy_setopt_long(handle, CURLOPT_SSL_SESSIONID_CACHE, 0)
        // https:// is TLS from the first byte anyway; smtp:// and imap:// must STARTTLS.
        tidings_curl_easy_setopt_long(handle, CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue))
        tidings_curl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, r.verify ? 1 : 0)
        tidings_curl_easy_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, r.verify ? 2 : 0)
        if let ca = r.caFile { tidings_curl_easy_setopt_str(handle, CURLOPT_CAINFO, ca) }
    }

    func outcome(_ code: CURLcode) -> Result<PeerCertificates, Error> {
        let detail = Redactor.shared.scrub(errorBuffer.message(code))
        switch code {
        case CURLE_OK:
            guard let chain = readCertinfo(), chain.count > 0 else {
                return .failure(CertificateProbeError.unreachable("the TLS handshake completed but libcurl reported no certificate"))
            }
            return .success(chain)
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(CertificateProbeError.timeout(request.timeout))
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ISSUER_ERROR:
            return .failure(CertificateProbeError.verification(detail))
        case CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            return .failure(CertificateProbeError.local(request.caFile.map { "cannot use ca_file \($0): \(detail)" } ?? detail))
        case CURLE_USE_SSL_FAILED:
            return .failure(CertificateProbeError.unreachable("\(detail) (the server does not offer STARTTLS)"))
        default:
            return .failure(CertificateProbeError.unreachable(detail))
        }
    }

    private func readCertinfo() -> PeerCertificates? {
        guard let handle else { return nil }
        var info: UnsafeMutablePointer<curl_certinfo>? = nil
        guard tidings_curl_easy_getinfo_certinfo(handle, &info) == CURLE_OK, let info else { return nil }
        let count = Int(info.pointee.num_of_certs)
        guard count > 0, let lists = info.pointee.certinfo else { return PeerCertificates(chain: []) }
        var chain: [[PeerCertificates.Field]] = []
        for i in 0..<min(count, Self.maxCertificates) {
            var fields: [PeerCertificates.Field] = []
            var node = lists[i]
            while let n = node, fields.count < 64 {
                if let data = n.pointee.data {
                    let length = min(strlen(data), Self.maxFieldBytes)
                    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                    if let colon = line.firstIndex(of: ":") {
                        fields.append(PeerCertificates.Field(String(line[..<colon]), String(line[line.index(after: colon)...])))
                    }
                }
                node = n.pointee.next
            }
            chain.append(fields)
        }
        return PeerCertificates(chain: chain, count: count)
    }
}
