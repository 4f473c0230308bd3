import FoundationEssentials
import Logging
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "imap"`: the messages of one mailbox that match an IMAP search, one item of kind
/// `mail` each (DESIGN §12).
///
/// ```toml
/// provider = "imap"
/// url = "imaps://mail.example.com/INBOX"     # or imap://…:143/INBOX with STARTTLS (required)
/// username = "me@example.com"
/// password_file = "~/.config/tidings/mail.pass"
/// search = "UNSEEN"                          # IMAP SEARCH criteria
/// starttls = true                            # imap:// only; false (no TLS) only to a loopback host
/// ca_file = "/etc/ssl/private-ca.pem"        # optional
/// ```
/// Read only: the mailbox is opened with `EXAMINE`, messages are read with `BODY.PEEK`, and no
/// command that changes a flag is ever sent. Key `UIDVALIDITY/UID`; a message that stops
/// matching (read elsewhere) is removed; a new `UIDVALIDITY` (the server renumbered the
/// mailbox) makes the current messages a new, silent baseline.
package struct IMAPProvider: Provider {
    /// `imaps://host[:port]/` or `imap://host[:port]/`: the server, without the mailbox.
    package var server: URL
    package var security: MailSecurity
    /// The mailbox, decoded (`INBOX`, `Lists/Swift`).
    package var mailbox: String
    package var username: String
    package var password: Secret
    /// IMAP SEARCH criteria, as given (`UNSEEN`, `UNSEEN FROM "boss"`).
    package var search: String
    package var caFile: String?
    /// How many of the newest matching messages are read per poll.
    package var readLimit: Int
    /// How many matching messages are watched at most (the newest); the rest are cut with a warning.
    package var watchLimit: Int

    package static let defaultReadLimit = 200
    package static let defaultWatchLimit = 10_000
    static let maxTitle = 300
    static let maxBody = 1000
    static let bodyLines = 8
    /// What is read of each message, never marking it read (`BODY.PEEK`): its header fields, cut
    /// at 2 KiB (a one-line `Subject` of any size stays one short answer line), and the first
    /// 4 KiB of its text: enough for the first lines of a text part after a few MIME headers.
    static let headerFields = "SUBJECT FROM TO DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING"
    static let fetchItems = "(UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (\(headerFields))]<0.2048> BODY.PEEK[TEXT]<0.4096>)"
    /// Messages per `UID FETCH`: at most about 6.2 KiB each, 100 KiB an answer.
    static let fetchBatch = 16

    package init(
        server: URL, security: MailSecurity, mailbox: String, username: String, password: Secret, search: String = "UNSEEN",
        caFile: String? = nil, readLimit: Int = IMAPProvider.defaultReadLimit, watchLimit: Int = IMAPProvider.defaultWatchLimit
    ) {
        self.server = server
        self.security = security
        self.mailbox = mailbox
        self.username = username
        self.password = password
        self.search = search
        self.caFile = caFile
        self.readLimit = readLimit
        self.watchLimit = watchLimit
    }

    package var host: String? { server.host }

    package static let factory = ProviderFactory(name: "imap", summary: "messages in an IMAP mailbox (read only)") { o, _, _ in
        let (server, security, mailbox) = try location(o)
        let username = try o.requiredString("username")
        guard !username.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw o.error("username", "\(o.what): 'username' must not contain control characters")
        }
        let password = try o.secret("password", required: true)!
        if !password.value.isEmpty {
            // What AUTHENTICATE PLAIN / LOGIN put on the wire, should a server echo it back.
            _ = Secret(Data("\0\(username)\0\(password.value)".utf8).base64EncodedString())
            _ = Secret(Data(password.value.utf8).base64EncodedString())
        }
        let search = try o.string("search")?.trimmed(newlines: false) ?? "UNSEEN"
        guard !search.isEmpty, !search.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw o.error("search", "\(o.what): 'search' must be IMAP SEARCH criteria on one line (e.g. \"UNSEEN\")")
        }
        let caFile = try o.path("ca_file")
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw o.error("ca_file", "\(o.what): cannot read ca_file \(caFile)")
        }
        return IMAPProvider(
            server: server, security: security, mailbox: mailbox, username: username, password: password,
            search: search, caFile: caFile)
    }

    /// `url`: the server (without the mailbox), how the connection is secured, and the mailbox.
    static func location(_ o: OptionReader) throws -> (URL, MailSecurity, String) {
        let given = try o.requiredConfigURL("url")
        let raw = given.raw
        let shape = "'url' must be imaps://HOST[:PORT]/MAILBOX or imap://HOST[:PORT]/MAILBOX (STARTTLS)"
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), scheme == "imap" || scheme == "imaps",
            let host = url.host, !host.isEmpty
        else {
            throw o.error("url", "\(o.what): \(shape), not \"\(given.shown)\"")
        }
        guard url.user == nil, url.password == nil else {
            throw o.error("url", "\(o.what): 'url' must not carry credentials: use 'username' and 'password' (or 'password_file')")
        }
        guard url.query == nil, url.fragment == nil, !raw.contains(";") else {
            throw o.error("url", "\(o.what): 'url' must name a mailbox only (no ;UID=, query or fragment)")
        }
        var path = url.path
        if path.hasPrefix("/") { path.removeFirst() }
        let mailbox = path.isEmpty ? "INBOX" : path
        guard IMAPSyntax.quoted(mailbox) != nil else { throw o.error("url", "\(o.what): \(shape)") }
        // imap:// sends the password: STARTTLS is required, except to this machine.
        let security: MailSecurity
        switch (scheme, try o.bool("starttls")) {
        case ("imaps", nil): security = .implicitTLS
        case ("imaps", _): throw o.error("starttls", "\(o.what): 'starttls' is for imap:// only (imaps:// is TLS from the start)")
        case (_, true?): security = .startTLSRequired
        case (_, nil): security = isLoopback(host) ? .startTLSIfOffered : .startTLSRequired
        case (_, false?):
            guard isLoopback(host) else {
                throw o.error(
                    "starttls",
                    "\(o.what): IMAP without TLS (starttls = false) sends the password and the mail readable on the network; it is allowed only to a loopback host, not \(host) (use STARTTLS or imaps://)"
                )
            }
            security = .plainLoopback
        }
        guard let server = URL(string: "/", relativeTo: url)?.absoluteURL else { throw o.error("url", "\(o.what): \(shape)") }
        return (server, security, mailbox)
    }

    /// `localhost`, 127.0.0.0/8 and ::1, decided without DNS.
    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimming(scalarsIn: "[]")
        if h == "localhost" || h.hasSuffix(".localhost") || h == "::1" { return true }
        let octets = h.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    // MARK: - Polling

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        guard let reader = ctx.mailbox else { throw PollError(.transient, "this build of tidings cannot read IMAP mailboxes") }
        let session = try await reader.open(
            MailboxServer(
                url: server, security: security, caFile: caFile, username: username, password: password, timeout: ctx.timeout))
        do {
            let result = try await read(session, ctx)
            await session.close()
            return result
        } catch {
            await session.close()
            throw Self.pollError(error)
        }
    }

    /// One poll's commands on an open session.
    func read(_ session: any MailboxSession, _ ctx: PollContext) async throws -> PollResult {
        // The first answer also holds the greeting and login, with the server's capabilities.
        let examine = try IMAPResponseParser.parse(try await session.command("EXAMINE \(IMAPSyntax.quoted(IMAPSyntax.mailboxName(mailbox))!)", limit: 1 << 20))
        guard let validity = examine.compactMap(\.uidValidity).last else {
            throw PollError(.transient, "the server did not say the UIDVALIDITY of \(mailbox)")
        }
        // ESEARCH (RFC 4731) answers with ranges (`1:90000`), one short line for any mailbox.
        let esearch = examine.compactMap(\.capabilities).last?.contains("ESEARCH") ?? false
        let found = try IMAPResponseParser.parse(
            try await session.command(
                esearch ? "UID SEARCH RETURN (ALL) \(search)" : "UID SEARCH \(search)", limit: ctx.maxBody))
        let matching = esearch ? MatchingUIDs(found.flatMap { $0.searchRanges ?? [] }) : MatchingUIDs(uids: found.flatMap { $0.searchUIDs ?? [] })
        let total = matching.count
        if total > watchLimit {
            Log.warnOnce(
                "imap watch cut \(ctx.source)",
                """
                \(total) messages in \(mailbox) match '\(search)': watching the newest \(watchLimit) \
                (narrow 'search', e.g. "UNSEEN SINCE 1-Jan-2026")
                """, logger: ctx.logger)
        }
        let uids = matching.newest(watchLimit)
        let read = Array(uids.suffix(readLimit))
        var messages: [UInt32: Item] = [:]
        // In batches: an answer stays below the port's limit (128 KiB with libcurl).
        for start in stride(from: 0, to: read.count, by: Self.fetchBatch) {
            let batch = Array(read[start..<min(start + Self.fetchBatch, read.count)])
            let answer = try await session.command("UID FETCH \(IMAPSyntax.sequenceSet(batch)) \(Self.fetchItems)", limit: ctx.maxBody)
            for r in try IMAPResponseParser.parse(answer) {
                guard case .fetch(let attributes) = r, let item = Self.item(attributes, validity: validity),
                    let uid = attributes["UID"]?.number, batch.contains(uid)
                else { continue }
                messages[uid] = item
            }
        }
        // Older matching messages than the newest `readLimit` are watched without being read:
        // a message that was read before and slid out of the window is not "removed".
        let items = uids.reversed().map { uid in messages[uid] ?? Self.unread(uid, validity: validity) }
        let validators = Validators(etag: "uidvalidity \(validity)")
        if let before = ctx.validators.etag, before.hasPrefix("uidvalidity "), before != validators.etag {
            ctx.logger.notice(
                "\(mailbox): the server renumbered the mailbox (\(before) → UIDVALIDITY \(validity)): the \(items.count) matching messages are a new baseline")
            return .rebaseline(items, validators: validators)
        }
        return .snapshot(items, validators: validators)
    }

    /// A message is never edited: one fingerprint for all, so no text is ever "changed".
    static let fingerprint = "mail"

    /// A FETCH response as an item.
    static func item(_ a: [String: IMAPValue], validity: UInt32) -> Item? {
        guard let uid = a["UID"]?.number else { return nil }
        let headerBytes = a.first(where: { $0.key.hasPrefix("BODY[HEADER") })?.value.bytes ?? []
        let textBytes = a.first(where: { $0.key.hasPrefix("BODY[TEXT]") })?.value.bytes ?? []
        let fields = MailText.headerFields(headerBytes)
        // Decoded text passes through the Redactor: a message cannot plant a secret in an event.
        func header(_ name: String) -> String? {
            fields[name].map { Redactor.shared.scrub(MailText.decodeHeader($0)) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        let subject = header("subject")
        let from = header("from")
        let text = Redactor.shared.scrub(
            MailText.bodyText(textBytes, contentType: fields["content-type"], transferEncoding: fields["content-transfer-encoding"]))
        let lines = text.split(whereSeparator: \.isNewline).map { MailText.clean(String($0)) }.filter { !$0.isEmpty }
        var body = lines.prefix(bodyLines).joined(separator: "\n")
        if let from { body = "From: \(from)" + (body.isEmpty ? "" : "\n\n" + body) }
        var data: [String: JSONValue] = ["uid": .number(Double(uid)), "uidvalidity": .number(Double(validity))]
        if let from { data["from"] = .string(from) }
        if let to = header("to") { data["to"] = .string(FeedText.cut(to, 1000)) }
        if let date = header("date") { data["date"] = .string(FeedText.date(date) ?? date) }
        if let id = header("message-id") { data["message_id"] = .string(FeedText.cut(id.trimming(scalarsIn: "<> "), 1000)) }
        if let size = a["RFC822.SIZE"]?.number { data["size"] = .number(Double(size)) }
        return Item(
            key: "\(validity)/\(uid)", kind: "mail", title: FeedText.cut(subject ?? "(no subject)", maxTitle),
            body: FeedText.cut(body, maxBody), data: .object(data), fingerprint: fingerprint)
    }

    /// A matching message older than the newest `readLimit`: watched, not read.
    static func unread(_ uid: UInt32, validity: UInt32) -> Item {
        Item(
            key: "\(validity)/\(uid)", kind: "mail", title: "(an older message, not read by tidings)",
            data: .object(["uid": .number(Double(uid)), "uidvalidity": .number(Double(validity))]), fingerprint: fingerprint)
    }

    /// What the scheduler makes of a failure: a refused login is `auth-failed`.
    static func pollError(_ error: Error) -> Error {
        switch error {
        case let e as MailboxError:
            if case .loginRefused = e { return PollError(.auth, e.description) }
            return PollError(.transient, e.description)
        case let e as IMAPResponseParser.Malformed:
            return PollError(.transient, "unreadable IMAP answer: \(e.description)")
        default:
            return error
        }
    }
}
