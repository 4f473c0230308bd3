import FoundationEssentials
import Glibc
import TidingsPOSIX
import TidingsPluginAPI

/// `type = "email"`: one e-mail per event over SMTP (DESIGN §9), through the process's shared
/// ``MailTransport`` (libcurl).
///
/// Options: `smtp_url` (`smtps://host:465`, or `smtp://host:587` with STARTTLS required; plain
/// SMTP only to a loopback host), `starttls` (`smtp://` only: `true` requires it, `false` never
/// uses it and is allowed only on loopback; default: required, on loopback used when offered),
/// `username` + `password`* (SMTP AUTH), `from`, `to` (one address or a list), `ca_file` (PEM
/// certificate authorities instead of the system's, for a private or self-signed server),
/// `subject_template`, `body_template`, `html_template` (Mustache, DESIGN §4 event as context),
/// `timeout` (default "30s").
///
/// The message: `Date`, `From`, `To`, `Subject` (RFC 2047 when not ASCII; the severity in
/// brackets by default), `Message-ID` derived from the event id and the sink name (the same on
/// every retry), `Auto-Submitted: auto-generated` (RFC 3834), `X-Priority`/`Importance` from the
/// severity, `X-Tidings-Event`/`X-Tidings-Source`; the text as UTF-8 quoted-printable, and with an
/// `html_template` a multipart/alternative with the HTML too.
///
/// A digest (quiet hours, `group_wait`) is one message: the digest's heading as the subject, a
/// line per item, the Message-ID derived from the digest's id (the same on every retry).
///
/// Outcome, for the outbox: the final 250 delivers; a 4xx reply, no connection, a TLS or
/// certificate failure and a timeout are retried; a 5xx reply is a dead letter, except the
/// authentication replies (530, 534, 535, 538), which stop the sink until reload.
package struct EmailSink: Sink {
    /// Everything of the submission but the message: server, security, credentials, deadline.
    package var server: MailSubmission
    package var from: MailAddress
    package var to: [MailAddress]
    package var subject: MessageTemplate
    package var text: MessageTemplate
    package var html: MessageTemplate?
    /// The sink's name, part of the Message-ID.
    package var name: String
    package var transport: any MailTransport
    /// The clock for `Date` (tests pin it).
    package var now: @Sendable () -> Date

    /// The longest subject, in characters, before it is cut with "…".
    static let subjectLimit = 200
    /// The longest text or HTML part, in characters, before it is cut with "…".
    static let bodyLimit = 100_000
    static let maxRecipients = 100

    static let defaultSubject = "[{{severity}}] {{title}}"
    static let defaultBody = """
        {{title}}
        {{#body}}

        {{body}}
        {{/body}}
        {{#url}}

        {{url}}
        {{/url}}

        --\u{20}
        {{source}}: {{event}} {{kind}}, {{severity}}, {{observed_at}}
        Sent by tidings (event {{id}}).

        """

    /// The factory the config loader uses.
    package static let factory = SinkFactory(type: "email", summary: "send each event as an e-mail over SMTP (STARTTLS or SMTPS)") { o, setup in
        var server = try serverOptions(o)
        let from = try address(o, "from", try o.requiredString("from"))
        guard let list = try o.stringList("to"), !list.isEmpty else { throw o.error("to", "\(o.what): 'to' needs at least one address") }
        guard list.count <= maxRecipients else { throw o.error("to", "\(o.what): 'to' has \(list.count) addresses (at most \(maxRecipients))") }
        let to = try list.map { try address(o, "to", $0) }
        server.envelopeFrom = from.address
        server.recipients = to.map(\.address)
        var html: MessageTemplate?
        if o.has("html_template") { html = try MessageTemplate.option(o, "html_template", default: "", markup: .html) }
        return EmailSink(
            server: server, from: from, to: to,
            subject: try MessageTemplate.option(o, "subject_template", default: defaultSubject, markup: .plain),
            text: try MessageTemplate.option(o, "body_template", default: defaultBody, markup: .plain),
            html: html, name: setup.name, transport: setup.mail)
    }

    package init(
        server: MailSubmission, from: MailAddress, to: [MailAddress], subject: MessageTemplate, text: MessageTemplate,
        html: MessageTemplate?, name: String, transport: any MailTransport, now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.server = server
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
        self.name = name
        self.transport = transport
        self.now = now
    }

    /// `smtp_url`, `starttls`, `username`, `password`, `ca_file`, `timeout`, checked.
    static func serverOptions(_ o: OptionReader) throws -> MailSubmission {
        let raw = try o.requiredConfigURL("smtp_url").raw
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), ["smtp", "smtps"].contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw o.error("smtp_url", "\(o.what): 'smtp_url' must be smtps://HOST[:PORT] or smtp://HOST[:PORT]")
        }
        guard url.user == nil, url.password == nil else {
            throw o.error("smtp_url", "\(o.what): 'smtp_url' must not carry credentials: use 'username' and 'password' (or 'password_file')")
        }
        guard url.query == nil, url.fragment == nil else { throw o.error("smtp_url", "\(o.what): 'smtp_url' must not have a query or fragment") }
        let loopback = isLoopback(host)
        let security: MailSecurity
        let starttls = try o.bool("starttls")
        switch (scheme, starttls) {
        case ("smtps", nil): security = .implicitTLS
        case ("smtps", _): throw o.error("starttls", "\(o.what): 'starttls' is for smtp:// only (smtps:// is TLS from the start)")
        case (_, true?): security = .startTLSRequired
        case (_, nil): security = loopback ? .startTLSIfOffered : .startTLSRequired
        case (_, false?):
            guard loopback else {
                throw o.error(
                    "starttls",
                    "\(o.what): plain SMTP (starttls = false) sends the password and the mail readable on the network; it is allowed only to a loopback host, not \(host) (use STARTTLS or smtps://)"
                )
            }
            security = .plainLoopback
        }
        let username = try o.string("username")
        let password = try o.secret("password", required: false)
        if (username == nil) != (password == nil) {
            throw o.error(username == nil ? nil : "username", "\(o.what): set both 'username' and 'password' (SMTP AUTH), or neither")
        }
        if let username, username.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw o.error("username", "\(o.what): 'username' must not contain control characters")
        }
        if let username, let password, !password.value.isEmpty {
            // What SMTP AUTH puts on the wire (PLAIN, LOGIN), should a server echo it back.
            Redactor.shared.register(Data("\0\(username)\0\(password.value)".utf8).base64EncodedString())
            Redactor.shared.register(Data(password.value.utf8).base64EncodedString())
        }
        let caFile = try o.path("ca_file")
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw o.error("ca_file", "\(o.what): cannot read ca_file \(caFile)")
        }
        return MailSubmission(
            url: url, security: security, caFile: caFile, username: username, password: password,
            envelopeFrom: "", recipients: [], message: Data(), timeout: try o.duration("timeout", minimum: 1) ?? 30)
    }

    /// `localhost`, 127.0.0.0/8 and ::1: a relay on this machine.
    package static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimming(scalarsIn: "[]")
        if h == "localhost" || h.hasSuffix(".localhost") || h == "::1" { return true }
        var addr = in_addr()
        return inet_pton(AF_INET, h, &addr) == 1 && UInt32(bigEndian: addr.s_addr) >> 24 == 127
    }

    static func address(_ o: OptionReader, _ key: String, _ text: String) throws -> MailAddress {
        do { return try MailAddress(parsing: text) } catch {
            throw o.error(key, "\(o.what): '\(key)' is not a usable e-mail address: \(error)")
        }
    }

    package func deliver(_ events: [Event]) async throws {
        for e in events { try await send(e) }
    }

    /// Where messages name the server: `smtps://mail.example.org:465`.
    var endpoint: String { HTTPDelivery.display(server.url) }

    func send(_ event: Event) async throws { try await submit(message(for: event)) }

    /// A digest is one message (DESIGN §10).
    package var rendersDigests: Bool { true }

    package func deliverDigest(_ digest: Digest) async throws { try await submit(message(for: digest)) }

    func submit(_ message: MailMessage) async throws {
        var submission = server
        submission.message = message.rfc5322()
        do {
            _ = try await transport.send(submission)
        } catch {
            throw Self.judge(error, endpoint: endpoint)
        }
    }

    /// A transport failure in the outbox's terms.
    package static func judge(_ error: Error, endpoint: String) -> DeliveryError {
        guard let failure = error as? MailTransportError else {
            return DeliveryError(.retryable, "\(endpoint): \(error is CancellationError ? "cancelled" : "\(error)")")
        }
        let what = "\(endpoint): \(failure)"
        guard case .refused(let reply, _) = failure else { return DeliveryError(.retryable, what) }
        switch reply.code {
        case 400..<500:
            return DeliveryError(.retryable, what)
        case 530, 534, 535, 538:
            return DeliveryError(.gone, what + " (authentication failed: check the sink's username and password, then reload)")
        default:
            return DeliveryError(.permanent, what)
        }
    }

    /// The e-mail for `event` (no I/O; tests inspect it).
    package func message(for event: Event) -> MailMessage {
        MailMessage(
            from: from, to: to, subject: Self.cut(subject.render(event), Self.subjectLimit), date: now(),
            messageID: MailMessage.messageID(eventID: event.id, sink: name, from: from),
            text: Self.cut(text.render(event), Self.bodyLimit), html: html.map { Self.cut($0.render(event), Self.bodyLimit) },
            extraHeaders: Self.headers(event.severity) + [("X-Tidings-Event", event.id), ("X-Tidings-Source", event.source)])
    }

    /// The e-mail for a digest (no I/O; tests inspect it): the digest's heading as the subject, a
    /// line per item (severity, title, what happened, link), and with an `html_template` an HTML
    /// list too. Its Message-ID comes from the digest's id, so a retry is the same message.
    package func message(for digest: Digest) -> MailMessage {
        let plain = DigestText(digest, title: Self.itemTitle)
        let text = "\(plain.heading)\n\n" + plain.plainLines.joined(separator: "\n") + "\n\n-- \nSent by tidings (digest \(digest.id)).\n"
        var html: String?
        if self.html != nil {
            let h = DigestText(digest, title: Self.itemTitleHTML)
            html =
                "<p><strong>\(Markup.html.escape(h.heading))</strong></p>\n<ul>\n" + h.htmlLines.map { "<li>\($0)</li>\n" }.joined()
                + "</ul>\n<p>Sent by tidings (digest \(Markup.html.escape(digest.id))).</p>\n"
        }
        let sources = Set(digest.events.map(\.source)).sorted().joined(separator: ", ")
        return MailMessage(
            from: from, to: to, subject: Self.cut(plain.heading, Self.subjectLimit), date: now(),
            messageID: MailMessage.messageID(eventID: "digest-" + digest.id, sink: name, from: from),
            text: Self.cut(text, Self.bodyLimit), html: html.map { Self.cut($0, Self.bodyLimit) },
            extraHeaders: Self.headers(digest.severity) + [("X-Tidings-Digest", digest.id), ("X-Tidings-Source", sources)])
    }

    /// How each item of a digest is named (the sink's templates make whole messages, not titles).
    static let itemTitle = MessageTemplate.builtin("{{title}}", markup: .plain)
    static let itemTitleHTML = MessageTemplate.builtin("{{title}}", markup: .html)

    /// The header fields every message has: automatic (RFC 3834), and the severity as priority.
    static func headers(_ severity: Severity) -> [(String, String)] {
        var extra: [(String, String)] = [("Auto-Submitted", "auto-generated"), ("X-Auto-Response-Suppress", "All")]
        switch severity {
        case .critical: extra += [("X-Priority", "1 (Highest)"), ("Importance", "high")]
        case .warning: extra += [("X-Priority", "2 (High)")]
        case .info: break
        }
        return extra
    }

    /// `text` cut to `limit` characters, ending in "…" when cut.
    static func cut(_ text: String, _ limit: Int) -> String {
        text.count > limit ? String(text.prefix(limit - 1)) + "…" : text
    }
}
