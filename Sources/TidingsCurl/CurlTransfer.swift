import CCurl
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// One HTTP request on a ``CurlMultiLoop``: what to send, what has arrived so far, and who waits for it.
///
/// Created by ``CurlHTTPClient/send(_:)``. Once submitted, everything except `cancelled` is touched
/// only on the loop thread (libcurl calls the write and header callbacks there, inside
/// `curl_multi_perform`), so the class is `@unchecked Sendable` by that discipline.
final class CurlTransfer: CurlJob, @unchecked Sendable {
    let request: HTTPRequest
    /// Set by task cancellation, from any thread; the loop checks it when it picks the transfer up.
    private let cancelled = Atomic<Bool>(false)
    var continuation: CheckedContinuation<HTTPResponse, Error>?

    // Loop-thread state.
    private(set) var handle: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = CurlErrorBuffer()
    private var headers: [String: String] = [:]
    private var body = Data()
    private var failure: HTTPClientError?
    /// Connect only to public addresses (a redirect under ``PrivateRedirects``): every address
    /// libcurl is about to connect to is checked (``PrivateAddress``) and a private one refused.
    let publicOnly: Bool
    /// The private address refused, when `publicOnly` refused one.
    private var refusedAddress: String?
    /// The address of the server the transfer was connected to (`CURLINFO_PRIMARY_IP`), once done.
    private(set) var connectedAddress: [UInt8]?

    init(_ request: HTTPRequest, publicOnly: Bool = false) {
        self.request = request
        self.publicOnly = publicOnly
    }

    deinit {
        tidings_curl_slist_free_all(headerList)
    }

    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    func markCancelled() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    static let userAgent = "User-Agent: tidings/\(TidingsVersion.string)"

    func configure(_ handle: UnsafeMutableRawPointer) {
        self.handle = handle
        let me = Unmanaged.passUnretained(self).toOpaque()
        tidings_curl_easy_setopt_str(handle, CURLOPT_URL, request.url.absoluteString)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        // Never follow a redirect here: CurlHTTPClient follows them under the request's policy.
        tidings_curl_easy_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        tidings_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        tidings_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(min(max(request.timeout, 0.001), 1e9) * 1000))
        tidings_curl_easy_setopt_str(handle, CURLOPT_ACCEPT_ENCODING, "")  // every encoding libcurl decodes
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer.pointer)
        tidings_curl_easy_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlWriteCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_WRITEDATA, me)
        tidings_curl_easy_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, me)
        if publicOnly {
            // A new connection, so the address is checked: a cached one may be to anywhere.
            tidings_curl_easy_setopt_long(handle, CURLOPT_FRESH_CONNECT, 1)
            tidings_curl_easy_setopt_opensocket(handle, curlPublicOnlySocket)
            tidings_curl_easy_setopt_ptr(handle, CURLOPT_OPENSOCKETDATA, me)
        }
        if let ca = request.caFile {
            // This CA instead of the system's: no CA directory either.
            tidings_curl_easy_setopt_str(handle, CURLOPT_CAINFO, ca)
            tidings_curl_easy_setopt_ptr(handle, CURLOPT_CAPATH, nil)
        }

        let method = request.method.uppercased()
        if method == "HEAD" {
            tidings_curl_easy_setopt_long(handle, CURLOPT_NOBODY, 1)
        } else {
            // Refuses up front on a larger Content-Length; `receive` enforces it while streaming.
            tidings_curl_easy_setopt_off_t(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(request.maxBody))
            if let body = request.body, !body.isEmpty {
                tidings_curl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
                body.withUnsafeBytes { raw in
                    _ = tidings_curl_easy_setopt_ptr(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress))
                }
            } else if request.body != nil || method == "POST" {
                tidings_curl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, 0)
                tidings_curl_easy_setopt_str(handle, CURLOPT_COPYPOSTFIELDS, "")
            }
            // POSTFIELDS makes it a POST; any other method (GET with a body too) is named explicitly.
            if method != "GET" || request.body != nil, method != "POST" {
                tidings_curl_easy_setopt_str(handle, CURLOPT_CUSTOMREQUEST, method)
            }
        }

        var list: UnsafeMutablePointer<curl_slist>? = nil
        var hasUserAgent = false
        var hasExpect = false
        for (name, value) in request.headers {
            if name.lowercased() == "user-agent" { hasUserAgent = true }
            if name.lowercased() == "expect" { hasExpect = true }
            // "Name;" is libcurl's way of sending a header with an empty value.
            list = tidings_curl_slist_append(list, value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        if !hasUserAgent { list = tidings_curl_slist_append(list, Self.userAgent) }
        // No `Expect: 100-continue` round trip before a body.
        if !hasExpect && request.body != nil { list = tidings_curl_slist_append(list, "Expect:") }
        headerList = list
        tidings_curl_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, list)
    }

    /// A chunk of the (decoded) body; false aborts the transfer.
    fileprivate func receive(_ chunk: UnsafeRawBufferPointer) -> Bool {
        if body.count + chunk.count > request.maxBody {
            failure = .bodyTooLarge(limit: request.maxBody)
            return false
        }
        if body.isEmpty, let handle {
            var length: curl_off_t = -1
            tidings_curl_easy_getinfo_off_t(handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
            if length > 0 { body.reserveCapacity(min(Int(length), request.maxBody)) }
        }
        if let base = chunk.baseAddress { body.append(base.assumingMemoryBound(to: UInt8.self), count: chunk.count) }
        return true
    }

    /// One header line (status line, header, or the blank line ending a block).
    fileprivate func receiveHeader(_ line: UnsafeRawBufferPointer) {
        let bytes = line.bindMemory(to: UInt8.self)
        // A new status line: a 100 Continue (or a proxy's CONNECT answer) came first; keep only the last response's headers.
        if bytes.starts(with: "HTTP/".utf8) {
            headers.removeAll(keepingCapacity: true)
            return
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return }
        let name = String(unsafeUninitializedCapacity: colon) { out in
            for i in 0..<colon {
                let c = bytes[i]
                out[i] = (c >= 65 && c <= 90) ? c + 32 : c
            }
            return colon
        }
        var start = colon + 1
        var end = bytes.count
        func isSpace(_ c: UInt8) -> Bool { c == 32 || c == 9 || c == 13 || c == 10 }
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        if let previous = headers[name] {
            headers[name] = previous + ", " + value
        } else {
            headers[name] = value
        }
    }

    /// A socket for `address`, or none when it is private and this transfer is `publicOnly`.
    fileprivate func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let a = address.pointee
        if publicOnly {
            let bytes = Self.bytes(address)
            if bytes.map(PrivateAddress.isPrivate) ?? true {
                refusedAddress = bytes.flatMap(Self.text) ?? "of family \(a.family)"
                return -1  // CURL_SOCKET_BAD: libcurl tries the next address, if any
            }
        }
        return socket(a.family, a.socktype | Int32(SOCK_CLOEXEC.rawValue), a.protocol)
    }

    /// The address bytes of an IPv4 or IPv6 socket address (read in place: libcurl's storage
    /// behind `addr` is larger than `struct sockaddr` for IPv6).
    static func bytes(_ address: UnsafeMutablePointer<curl_sockaddr>) -> [UInt8]? {
        let raw = UnsafeRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        let length = Int(address.pointee.addrlen)
        switch Int32(address.pointee.family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            var v = raw.loadUnaligned(as: sockaddr_in.self).sin_addr
            return withUnsafeBytes(of: &v) { Array($0) }
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            var v = raw.loadUnaligned(as: sockaddr_in6.self).sin6_addr
            return withUnsafeBytes(of: &v) { Array($0) }
        default:
            return nil
        }
    }

    /// An address for messages (`10.0.0.1`, `fd00::1`).
    static func text(_ bytes: [UInt8]) -> String? {
        var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, bytes, &out, socklen_t(out.count)) != nil else { return nil }
        return String(decoding: out.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func outcome(_ code: CURLcode) -> Result<HTTPResponse, Error> {
        if let failure { return .failure(failure) }
        if code != CURLE_OK, let refusedAddress { return .failure(PrivateAddressRefused(address: refusedAddress)) }
        if let handle {
            var ip: UnsafeMutablePointer<CChar>?
            if tidings_curl_easy_getinfo_str(handle, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK, let ip {
                connectedAddress = PrivateAddress.bytes(String(cString: ip))
            }
        }
        var status = 0
        if let handle { tidings_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status) }
        switch code {
        case CURLE_OK:
            return .success(HTTPResponse(status: status, headers: headers, body: body))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(HTTPClientError.timeout(request.timeout))
        case CURLE_FILESIZE_EXCEEDED:
            return .failure(HTTPClientError.bodyTooLarge(limit: request.maxBody))
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR:
            let hint =
                request.caFile.map { " (checked against ca_file \($0))" }
                ?? " (for a private CA or a self-signed server, give its certificate as ca_file)"
            return .failure(HTTPClientError.transport("TLS certificate: " + Redactor.shared.scrub(errorBuffer.message(code)) + hint))
        default:
            return .failure(HTTPClientError.transport(Redactor.shared.scrub(errorBuffer.message(code))))
        }
    }
}

private func curlWriteCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
    return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
}

private func curlHeaderCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue().receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

/// A `publicOnly` transfer refused every address it could connect to: the first private one.
struct PrivateAddressRefused: Error {
    var address: String
}

private func curlPublicOnlySocket(_ me: UnsafeMutableRawPointer?, _ purpose: curlsocktype, _ address: UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t {
    guard let me, let address else { return -1 }
    return Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue().openSocket(address)
}
