import FoundationEssentials

/// Reads a mailbox over IMAP: the port a mail provider polls through (the plugin API has no
/// sockets; the executable's libcurl client implements it, as it implements ``MailTransport``).
///
/// A session is one authenticated connection: every command of it goes over that connection, in
/// order, so a mailbox opened by `EXAMINE` stays the selected one for the commands after it. The
/// port passes commands through as given; it is the caller's promise that none changes a flag
/// (only `EXAMINE`, `UID SEARCH` and `UID FETCH … BODY.PEEK[…]`, never `SELECT` or `BODY[…]`).
package protocol MailboxReader: Sendable {
    /// Prepares a session with `server`; the connection and login happen with the first command.
    func open(_ server: MailboxServer) async throws -> any MailboxSession
}

/// One IMAP connection, opened by ``MailboxReader/open(_:)``.
package protocol MailboxSession: Sendable {
    /// Sends `command` (without tag or line end; it must not contain CR or LF) and returns the
    /// server's answer as received: untagged lines with their literals (`{n}` and the n bytes
    /// after it), CRLF line ends; lines of the greeting and login may precede them on the first
    /// command. Throws a ``MailboxError``; an answer longer than `limit` bytes (or than the
    /// implementation's own limit, 128 KiB for libcurl's) is ``MailboxError/tooLarge(_:)`` as
    /// soon as it passes it.
    func command(_ command: String, limit: Int) async throws -> Data
    /// Logs out and closes the connection (bounded by the session's deadline).
    func close() async
}

/// Where a ``MailboxSession`` connects, and as whom.
package struct MailboxServer: Sendable {
    /// `imaps://host[:port]/` or `imap://host[:port]/`, without user info or mailbox.
    package var url: URL
    /// `implicitTLS` for `imaps://`; `startTLSRequired` for `imap://` (``MailSecurity`` is shared
    /// with SMTP: the same four ways to secure a mail connection).
    package var security: MailSecurity
    /// A PEM file of certificate authorities to verify the server with, instead of the system's.
    package var caFile: String?
    package var username: String
    /// Registered with the ``Redactor`` when it was read from the config.
    package var password: Secret
    /// Deadline of the whole session, seconds: every command gets what is left of it.
    package var timeout: TimeInterval

    package init(url: URL, security: MailSecurity, caFile: String? = nil, username: String, password: Secret, timeout: TimeInterval) {
        self.url = url
        self.security = security
        self.caFile = caFile
        self.username = username
        self.password = password
        self.timeout = timeout
    }
}

/// Why an IMAP command failed. Messages never carry the password.
package enum MailboxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server refused the login (LOGIN or AUTHENTICATE answered `NO`).
    case loginRefused(String)
    /// The server answered a command with `NO` or `BAD` (its own words, redacted).
    case refused(command: String, text: String)
    /// The server's certificate could not be verified.
    case certificate(String)
    /// TLS could not be set up (no STARTTLS where it is required, a failed handshake).
    case tls(String)
    /// No connection, or it broke.
    case unreachable(String)
    /// The session's deadline passed.
    case timeout(TimeInterval)
    /// An answer was longer than the limit, in bytes: cut off.
    case tooLarge(Int)

    package var description: String {
        switch self {
        case .loginRefused(let text): return "login refused: \(Redactor.shared.scrub(text))"
        case .refused(let command, let text): return "\(command) refused: \(Redactor.shared.scrub(text))"
        case .certificate(let detail): return "certificate not trusted: \(detail)"
        case .tls(let detail): return "TLS failed: \(detail)"
        case .unreachable(let detail): return detail
        case .timeout(let seconds): return "no complete answer within \(DurationParser.format(seconds))"
        case .tooLarge(let limit): return "the server's answer passed \(limit) bytes; cut off"
        }
    }
}
