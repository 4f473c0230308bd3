import CCurl
import FoundationEssentials
import Glibc
import Synchronization
import TidingsPluginAPI

/// ``MailTransport`` on the same libcurl multi loop (and thread) as HTTP: a process has one
/// curl thread for every provider, HTTP sink and mail sink.
extension CurlHTTPClient: MailTransport {
    package func send(_ message: MailSubmission) async throws -> MailReceipt {
        try await loop.run(CurlMailTransfer(message))
    }
}

/// One SMTP submission on a ``CurlMultiLoop``: libcurl's SMTP client speaks EHLO, STARTTLS,
/// AUTH, MAIL FROM, RCPT TO and DATA, dot-stuffs the uploaded message and ends it with
/// `CRLF.CRLF`. This class feeds it the message and keeps the server's last reply, which libcurl
/// hands to the header callback line by line, so failures carry the server's own words.
final class CurlMailTransfer: CurlJob, @unchecked Sendable {
    let submission: MailSubmission
    private let cancelled = Atomic<Bool>(false)
    var continuation: CheckedContinuation<MailReceipt, Error>?

    // Loop-thread state.
    private(set) var handle: UnsafeMutableRawPointer?
    private var recipientList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = CurlErrorBuffer()
    /// How much of the message libcurl has read.
    private var sent = 0
    private var replies = SMTPReplyReader()

    init(_ submission: MailSubmission) {
        self.submission = submission
    }

    deinit { tidings_curl_slist_free_all(recipientList) }

    var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
    func markCancelled() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    func configure(_ handle: UnsafeMutableRawPointer) {
        self.handle = handle
        let me = Unmanaged.passUnretained(self).toOpaque()
        let s = submission
        tidings_curl_easy_setopt_str(handle, CURLOPT_URL, s.url.absoluteString)
        tidings_curl_easy_setopt_str(handle, CURLOPT_PROTOCOLS_STR, "smtp,smtps")
        tidings_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        tidings_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(min(max(s.timeout, 0.001), 1e9) * 1000))
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_ERRORBUFFER, errorBuffer.pointer)
        // One session per message, ended with QUIT: mail is rare, and a cached SMTP connection
        // the server has since timed out would only fail the next message.
        tidings_curl_easy_setopt_long(handle, CURLOPT_FORBID_REUSE, 1)
        s.security.configure(handle, caFile: s.caFile)
        if let user = s.username, let password = s.password {
            tidings_curl_easy_setopt_str(handle, CURLOPT_USERNAME, user)
            tidings_curl_easy_setopt_str(handle, CURLOPT_PASSWORD, password.value)
        }
        tidings_curl_easy_setopt_str(handle, CURLOPT_MAIL_FROM, "<\(s.envelopeFrom)>")
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for r in s.recipients { list = tidings_curl_slist_append(list, "<\(r)>") }
        recipientList = list
        tidings_curl_easy_setopt_slist(handle, CURLOPT_MAIL_RCPT, list)
        tidings_curl_easy_setopt_long(handle, CURLOPT_UPLOAD, 1)
        tidings_curl_easy_setopt_off_t(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(s.message.count))
        // The read callback has the write callback's C signature.
        tidings_curl_easy_setopt_callback(handle, CURLOPT_READFUNCTION, curlMailReadCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_READDATA, me)
        tidings_curl_easy_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlMailReplyCallback)
        tidings_curl_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, me)
    }

    /// Copies the next part of the message into libcurl's buffer; 0 = the end.
    fileprivate func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(buffer.count, submission.message.count - sent)
        guard n > 0 else { return 0 }
        submission.message.withUnsafeBytes { raw in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[sent..<(sent + n)]))
        }
        sent += n
        return n
    }

    fileprivate func receiveReplyLine(_ line: UnsafeRawBufferPointer) {
        replies.take(line)
    }

    func outcome(_ code: CURLcode) -> Result<MailReceipt, Error> {
        var status = 0
        if let handle { tidings_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status) }
        let reply = MailReply(code: status, text: replies.last)
        let detail = Redactor.shared.scrub(errorBuffer.message(code))
        switch code {
        case CURLE_OK:
            return .success(MailReceipt(reply: reply))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(MailTransportError.timeout(submission.timeout))
        case _ where MailSecurity.certificateFailures.contains(code.rawValue):
            return .failure(MailTransportError.certificate(MailSecurity.certificateProblem(detail, caFile: submission.caFile)))
        case CURLE_USE_SSL_FAILED where status < 400:
            return .failure(MailTransportError.tls("\(detail) (this sink requires STARTTLS: the server must offer it; or use smtps://)"))
        case CURLE_SSL_CONNECT_ERROR:
            return .failure(MailTransportError.tls(detail))
        case CURLE_LOGIN_DENIED where status < 400:
            return .failure(MailTransportError.refused(MailReply(code: 535, text: detail), step: "AUTH"))
        default:
            guard status >= 400 else { return .failure(MailTransportError.unreachable(detail)) }
            return .failure(MailTransportError.refused(reply, step: Self.step(code, detail: detail)))
        }
    }

    /// What the server refused, from libcurl's result and message ("MAIL failed: 550").
    static func step(_ code: CURLcode, detail: String) -> String {
        switch code {
        case CURLE_LOGIN_DENIED: return "AUTH"
        case CURLE_USE_SSL_FAILED: return "STARTTLS"
        case CURLE_REMOTE_ACCESS_DENIED: return "EHLO"
        case CURLE_SEND_ERROR where detail.hasPrefix("MAIL"): return "MAIL FROM"
        case CURLE_SEND_ERROR where detail.hasPrefix("RCPT"): return "RCPT TO"
        case CURLE_SEND_ERROR, CURLE_WEIRD_SERVER_REPLY, CURLE_UPLOAD_FAILED: return "the message (DATA)"
        default: return "the session"
        }
    }
}

/// Collects SMTP reply lines (`250-first`, `250 last`) into the last complete reply's text,
/// bounded so a hostile server cannot grow it. The 221 answering the session's QUIT is skipped:
/// the reply that matters (and that `CURLINFO_RESPONSE_CODE` reports) came before it.
struct SMTPReplyReader {
    private(set) var last = ""
    private var current = ""
    static let limit = 512

    mutating func take(_ line: UnsafeRawBufferPointer) {
        // Control characters (an escape sequence from a hostile server) never reach a log.
        let bytes = Array(
            String(decoding: line, as: UTF8.self).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }
                .reduce(into: "") { $0.unicodeScalars.append($1) }.trimmed(newlines: false).utf8)
        guard bytes.count >= 3, bytes[0..<3].allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return }
        let more = bytes.count > 3 && bytes[3] == UInt8(ascii: "-")
        let words = bytes.count > 4 ? String(decoding: bytes[4...], as: UTF8.self) : ""
        if current.utf8.count < Self.limit {
            current += current.isEmpty ? words : " " + words
        }
        if !more {
            if !bytes.starts(with: "221".utf8) {
                last = Redactor.shared.shortened(current, to: Self.limit)
            }
            current = ""
        }
    }
}

private func curlMailReadCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me, let data else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<CurlMailTransfer>.fromOpaque(me).takeUnretainedValue()
    return transfer.read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
}

private func curlMailReplyCallback(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ me: UnsafeMutableRawPointer?) -> Int {
    guard let me else { return 0 }
    Unmanaged<CurlMailTransfer>.fromOpaque(me).takeUnretainedValue().receiveReplyLine(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}
