import FoundationEssentials

/// Sends one e-mail message over SMTP. The core has no sockets: the executable makes the one
/// implementation (libcurl, on the same thread as the HTTP client) and the config loader hands it
/// to sinks as ``SinkSetup/mail``.
package protocol MailTransport: Sendable {
    /// Submits `message` and returns the server's final reply (a 2xx), or throws a
    /// ``MailTransportError``.
    func send(_ message: MailSubmission) async throws -> MailReceipt
}

/// How the connection to the SMTP server is secured.
package enum MailSecurity: String, Sendable, Equatable {
    /// `smtps://`: TLS from the first byte.
    case implicitTLS
    /// `smtp://` with STARTTLS required: a server that does not offer it is refused.
    case startTLSRequired
    /// `smtp://` to a loopback host: STARTTLS when the server offers it (with certificate
    /// verification), plain otherwise. Only for a relay on the same machine.
    case startTLSIfOffered
    /// `smtp://` to a loopback host, never STARTTLS (a local relay with an unusable certificate).
    case plainLoopback
}

/// One message for ``MailTransport/send(_:)``: where to, as whom, the envelope and the bytes.
package struct MailSubmission: Sendable {
    /// `smtp://host[:port][/helo-name]` or `smtps://…`, without user info.
    package var url: URL
    package var security: MailSecurity
    /// A PEM file of certificate authorities to verify the server with, instead of the system's.
    package var caFile: String?
    /// SMTP AUTH, when both are set (the password is registered with the ``Redactor``).
    package var username: String?
    package var password: Secret?
    /// The envelope sender (`MAIL FROM`), an addr-spec without angle brackets.
    package var envelopeFrom: String
    /// The envelope recipients (`RCPT TO`), addr-specs.
    package var recipients: [String]
    /// The RFC 5322 message: headers and body, CRLF line endings. The transport dot-stuffs it.
    package var message: Data
    /// Whole-submission deadline, seconds.
    package var timeout: TimeInterval

    package init(
        url: URL, security: MailSecurity, caFile: String? = nil, username: String? = nil, password: Secret? = nil,
        envelopeFrom: String, recipients: [String], message: Data, timeout: TimeInterval
    ) {
        self.url = url
        self.security = security
        self.caFile = caFile
        self.username = username
        self.password = password
        self.envelopeFrom = envelopeFrom
        self.recipients = recipients
        self.message = message
        self.timeout = timeout
    }
}

/// An SMTP reply: the code and its text (continuation lines joined by spaces), redacted.
package struct MailReply: Sendable, Equatable, CustomStringConvertible {
    package var code: Int
    package var text: String
    package init(code: Int, text: String) {
        self.code = code
        self.text = Redactor.shared.scrub(text)
    }
    package var description: String { text.isEmpty ? "\(code)" : "\(code) \(text)" }
}

/// The server accepted the message: its final reply (often naming the queue id).
package struct MailReceipt: Sendable, Equatable {
    package var reply: MailReply
    package init(reply: MailReply) { self.reply = reply }
}

/// Why a submission failed. Messages never carry the password.
package enum MailTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered a command with a 4xx or 5xx reply; `step` is what was refused, as
    /// the transport names it (`"MAIL FROM"`, `"RCPT TO"`, `"DATA"`, `"AUTH"`, …).
    case refused(MailReply, step: String)
    /// The server's certificate could not be verified (unknown authority, wrong name, expired).
    case certificate(String)
    /// TLS could not be set up (no STARTTLS offered where it is required, handshake failure).
    case tls(String)
    /// No connection, or it broke before the server answered.
    case unreachable(String)
    /// The deadline passed.
    case timeout(TimeInterval)

    package var description: String {
        switch self {
        case .refused(let reply, let step): return "\(step) refused: \(reply)"
        case .certificate(let detail): return "certificate not trusted: \(detail)"
        case .tls(let detail): return "TLS failed: \(detail)"
        case .unreachable(let detail): return detail
        case .timeout(let seconds): return "no answer within \(DurationParser.format(seconds))"
        }
    }
}
