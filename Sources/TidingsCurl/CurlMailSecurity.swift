import CCurl
import TidingsPluginAPI

/// What SMTP (``CurlMailTransfer``) and IMAP (``CurlMailboxConnect``) share: how a mail
/// connection is secured, and how a certificate that does not verify is told.
extension MailSecurity {
    /// Sets `CURLOPT_USE_SSL` for this way of securing the connection, and `CURLOPT_CAINFO`.
    func configure(_ handle: UnsafeMutableRawPointer, caFile: String?) {
        let use: curl_usessl
        switch self {
        case .implicitTLS, .startTLSRequired: use = CURLUSESSL_ALL
        case .startTLSIfOffered: use = CURLUSESSL_TRY
        case .plainLoopback: use = CURLUSESSL_NONE
        }
        tidings_curl_easy_setopt_long(handle, CURLOPT_USE_SSL, Int(use.rawValue))
        if let caFile { tidings_curl_easy_setopt_str(handle, CURLOPT_CAINFO, caFile) }
    }

    /// libcurl results that mean the server's certificate was not trusted.
    static let certificateFailures: Set<UInt32> = [
        CURLE_PEER_FAILED_VERIFICATION.rawValue, CURLE_SSL_CACERT_BADFILE.rawValue, CURLE_SSL_ISSUER_ERROR.rawValue,
        CURLE_SSL_CERTPROBLEM.rawValue,
    ]

    /// libcurl's message about a certificate, and what to do about it.
    static func certificateProblem(_ detail: String, caFile: String?) -> String {
        detail + (caFile.map { " (checked against ca_file \($0))" } ?? " (for a private CA or a self-signed server, give its certificate as ca_file)")
    }
}
