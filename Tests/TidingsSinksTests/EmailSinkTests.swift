import Foundation
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

/// The pure parts of the `email` sink: addresses, RFC 2047 words, folding, quoted-printable,
/// the Message-ID, the message, config checks and the outcome of SMTP replies. The wire is
/// tested against a real aiosmtpd in Tests/e2e/test_email.py.
final class EmailSinkTests: XCTestCase {
    // MARK: addresses

    func testAddressesAreParsedWithOptionalDisplayNames() throws {
        XCTAssertEqual(try MailAddress(parsing: "ops@example.org"), MailAddress(address: "ops@example.org"))
        XCTAssertEqual(try MailAddress(parsing: " Ops Team <ops@example.org> "), MailAddress(address: "ops@example.org", name: "Ops Team"))
        XCTAssertEqual(try MailAddress(parsing: "\"Ops, Inc.\" <o.p+s@mail.example.org>"), MailAddress(address: "o.p+s@mail.example.org", name: "Ops, Inc."))
        XCTAssertEqual(try MailAddress(parsing: "Jörg <j@[192.0.2.1]>").address, "j@[192.0.2.1]")
        XCTAssertEqual(try MailAddress(parsing: "root@localhost").domain, "localhost")
        XCTAssertNil(try MailAddress(parsing: "j@[192.0.2.1]").domain)
    }

    func testAddressesThatCouldInjectHeadersOrAreInvalidAreRefused() {
        for bad in [
            "ops@example.org\r\nBcc: victim@example.org", "ops@example.org\nBcc: x@y", "Name\r\n <a@b.org>", "a@b.org\u{0}",
            "ops", "@example.org", "ops@", "o..ps@example.org", ".ops@example.org", "ops.@example.org", "o ps@example.org",
            "ops@exa mple.org", "ops@-example.org", "ops@example..org", "ops@exämple.org", "öps@example.org",
            "Name <ops@example.org", "\"Evil\\\" <a@b.org>", String(repeating: "a", count: 65) + "@example.org",
            "ops@" + String(repeating: "a", count: 64) + ".org", "a\"b@example.org", "a(b)@example.org",
        ] {
            XCTAssertThrowsError(try MailAddress(parsing: bad), "accepted \(bad.debugDescription)")
        }
        XCTAssertThrowsError(try MailAddress(parsing: "a@b.org\r\nBcc: x@y")) { error in
            XCTAssertTrue("\(error)".contains("line breaks"), "\(error)")
        }
    }

    func testDisplayNamesAreQuotedOrEncoded() throws {
        XCTAssertEqual(try MailAddress(parsing: "Ops Team <o@x.org>").headerTokens, ["Ops", "Team", "<o@x.org>"])
        XCTAssertEqual(try MailAddress(parsing: "Ops, Inc. <o@x.org>").headerTokens, ["\"Ops, Inc.\"", "<o@x.org>"])
        let encoded = try MailAddress(parsing: "Jörg Müller <j@x.org>").headerTokens
        XCTAssertEqual(encoded.last, "<j@x.org>")
        XCTAssertEqual(decodeWords(Array(encoded.dropLast())), "Jörg Müller")
    }

    // MARK: RFC 2047 and folding

    func testNonASCIISubjectIsEncodedInWordsOfWholeCharactersWithinTheLimits() throws {
        let subject = "[critical] Größe ✓ 日本 " + String(repeating: "ü日✓👩‍👩‍👧‍👦", count: 12)
        let field = MailHeader.unstructured("Subject", subject)
        let lines = field.components(separatedBy: "\r\n")
        XCTAssertTrue(lines[0].hasPrefix("Subject: =?UTF-8?B?"))
        for (i, line) in lines.enumerated() {
            XCTAssertLessThanOrEqual(line.count, 76, "line \(i): \(line)")
            if i > 0 { XCTAssertTrue(line.hasPrefix(" =?UTF-8?B?"), line) }
        }
        let words = field.dropFirst("Subject: ".count).split(whereSeparator: { $0 == " " || $0 == "\r\n" }).map(String.init)
        XCTAssertGreaterThan(words.count, 3)
        for word in words {
            XCTAssertLessThanOrEqual(word.count, 75, word)
            // Each word decodes on its own to valid UTF-8 that ends on a character boundary.
            let payload = String(word.dropFirst(10).dropLast(2))
            let bytes = try XCTUnwrap(Data(base64Encoded: payload))
            XCTAssertNotNil(String(data: bytes, encoding: .utf8), "word \(word) splits a character")
        }
        XCTAssertEqual(decodeWords(words), subject)
    }

    func testACharacterLongerThanOneWordIsSplitBetweenItsScalars() {
        let zalgo = "a" + String(repeating: "\u{0301}", count: 40)  // one grapheme, 81 bytes
        let words = MailHeader.encodedWords(zalgo)
        XCTAssertGreaterThan(words.count, 1)
        XCTAssertTrue(words.allSatisfy { $0.count <= 75 })
        XCTAssertEqual(decodeWords(words), zalgo)
    }

    func testASCIISubjectIsFoldedAtSpacesAndLooksLikeEncodedWordsGetEncoded() {
        let long = (1...30).map { "word\($0)" }.joined(separator: " ")
        let field = MailHeader.unstructured("Subject", long)
        XCTAssertFalse(field.contains("=?"))
        XCTAssertTrue(field.components(separatedBy: "\r\n").allSatisfy { $0.count <= 78 })
        XCTAssertEqual(field.replacingOccurrences(of: "\r\n", with: ""), "Subject: " + long)
        XCTAssertTrue(MailHeader.unstructured("Subject", "=?UTF-8?B?SGk=?=").hasPrefix("Subject: =?UTF-8?B?"))
        // Line breaks in remote text cannot start a new header.
        let injected = MailHeader.unstructured("Subject", "hi\r\nBcc: victim@example.org")
        XCTAssertEqual(injected, "Subject: hi Bcc: victim@example.org")
        let unbreakable = MailHeader.unstructured("Subject", String(repeating: "x", count: 120))
        XCTAssertTrue(unbreakable.components(separatedBy: "\r\n").allSatisfy { $0.count <= 76 }, unbreakable)
    }

    func testDateIsRFC5322() {
        XCTAssertEqual(MailHeader.date(Date(timeIntervalSince1970: 1_800_000_000)), "Fri, 15 Jan 2027 08:00:00 +0000")
        XCTAssertEqual(MailHeader.date(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 +0000")
    }

    // MARK: quoted-printable

    func testQuotedPrintableKeepsLinesShortAndRoundTrips() {
        let text = "Größe = 5\n.\n..dot\ntrailing space \n" + String(repeating: "ab✓", count: 60) + "\n\ttab"
        let qp = QuotedPrintable.encode(text)
        XCTAssertFalse(qp.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "bare LF")
        for line in qp.components(separatedBy: "\r\n") {
            XCTAssertLessThanOrEqual(line.count, 76, line)
            XCTAssertFalse(line.hasSuffix(" ") || line.hasSuffix("\t"), "trailing white space: \(line)")
            XCTAssertTrue(line.unicodeScalars.allSatisfy { $0.isASCII })
        }
        XCTAssertTrue(qp.contains("Gr=C3=B6=C3=9Fe =3D 5"))
        XCTAssertTrue(qp.contains("\r\n.\r\n..dot\r\n"), "dots are left to the SMTP layer's dot-stuffing")
        XCTAssertEqual(decodeQP(qp), text.replacingOccurrences(of: "\n", with: "\r\n"))
    }

    // MARK: the message

    func testMessageIDIsDerivedFromTheEventAndTheSink() throws {
        let from = try MailAddress(parsing: "Tidings <tidings@Example.ORG>")
        XCTAssertEqual(MailMessage.messageID(eventID: "01JD3V", sink: "ops mail", from: from), "01JD3V.ops_mail@example.org")
        XCTAssertEqual(
            MailMessage.messageID(eventID: "01JD3V", sink: "a/b<c>", from: try MailAddress(parsing: "t@[192.0.2.1]")), "01JD3V.a_b_c_@tidings.invalid")
    }

    func testMessageHasEveryHeaderAndCRLFLines() throws {
        let sink = try emailSink(
            """
            to = ["Jörg <joerg@example.org>", "ops@example.org"]
            """)
        let event = Event(
            id: "01JD3VTESTEVENT0000000000", source: "shop", provider: "exec", kind: "message", event: .new, key: "k",
            title: "Größe ✓ 日本", body: "line 1\n.\nline 3", url: "https://example.org/e?a=1&b=2", severity: .critical,
            observedAt: Date(timeIntervalSince1970: 1_800_000_000))
        let text = String(decoding: sink.message(for: event).rfc5322(), as: UTF8.self)
        XCTAssertFalse(text.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "bare LF")
        let parts = text.components(separatedBy: "\r\n\r\n")
        let headers = parts[0].replacingOccurrences(of: "\r\n ", with: " ").components(separatedBy: "\r\n")
        func header(_ name: String) -> String? {
            headers.first { $0.lowercased().hasPrefix(name.lowercased() + ": ") }.map { String($0.dropFirst(name.count + 2)) }
        }
        XCTAssertEqual(header("Date"), "Fri, 15 Jan 2027 08:00:00 +0000")
        XCTAssertEqual(header("From"), "Tidings <tidings@Example.ORG>", "the address as written")
        XCTAssertEqual(header("Message-ID"), "<01JD3VTESTEVENT0000000000.mail@example.org>")
        XCTAssertEqual(header("MIME-Version"), "1.0")
        XCTAssertEqual(header("Content-Type"), "text/plain; charset=utf-8")
        XCTAssertEqual(header("Content-Transfer-Encoding"), "quoted-printable")
        XCTAssertEqual(header("Auto-Submitted"), "auto-generated")
        XCTAssertEqual(header("X-Priority"), "1 (Highest)")
        XCTAssertEqual(header("X-Tidings-Event"), event.id)
        XCTAssertEqual(header("X-Tidings-Source"), "shop")
        let subjectWords = try XCTUnwrap(header("Subject")).split(separator: " ").map(String.init)
        XCTAssertEqual(decodeWords(subjectWords), "[critical] Größe ✓ 日本")
        let to = try XCTUnwrap(header("To"))
        XCTAssertTrue(to.hasSuffix("<joerg@example.org>, ops@example.org"), to)
        XCTAssertTrue(parts[0].components(separatedBy: "\r\n").allSatisfy { $0.count <= 78 })
        let body = decodeQP(parts.dropFirst().joined(separator: "\r\n\r\n"))
        XCTAssertTrue(body.hasPrefix("Größe ✓ 日本\r\n\r\nline 1\r\n.\r\nline 3\r\n\r\nhttps://example.org/e?a=1&b=2\r\n"), body)
        XCTAssertTrue(body.contains("shop: new message, critical, 2027-01-15T08:00:00Z"), body)
    }

    func testHTMLTemplateMakesAMultipartAlternativeWithEscapedText() throws {
        let sink = try emailSink(
            """
            subject_template = "{{source}}: {{title}}"
            html_template = "<p><a href=\\"{{url}}\\">{{title}}</a></p>"
            """)
        let event = Event(
            source: "s", provider: "p", kind: "k", event: .new, key: "k", title: "<b>x</b> & y",
            url: "https://e.org/?a=1&b=2", observedAt: Date())
        let message = sink.message(for: event)
        XCTAssertEqual(message.subject, "s: <b>x</b> & y", "plain text is not escaped")
        let text = String(decoding: message.rfc5322(), as: UTF8.self)
        let boundary = "=_tidings_\(event.id).mail"
        XCTAssertTrue(text.contains("Content-Type: multipart/alternative; boundary=\"\(boundary)\""))
        XCTAssertTrue(text.contains("--\(boundary)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"))
        XCTAssertTrue(text.contains("--\(boundary)\r\nContent-Type: text/html; charset=utf-8"))
        XCTAssertTrue(text.hasSuffix("--\(boundary)--\r\n"))
        XCTAssertTrue(decodeQP(text).contains("<p><a href=\"https://e.org/?a=1&amp;b=2\">&lt;b&gt;x&lt;/b&gt; &amp; y</a></p>"))
    }

    func testLongSubjectIsCutWithAnEllipsis() throws {
        let sink = try emailSink("")
        let event = Event(source: "s", provider: "p", kind: "k", event: .new, key: "k", title: String(repeating: "日", count: 500), observedAt: Date())
        let subject = sink.message(for: event).subject
        XCTAssertEqual(subject.count, 200)
        XCTAssertTrue(subject.hasPrefix("[info] 日") && subject.hasSuffix("日…"))
    }

    // MARK: config

    func testConfigSecuresTheConnection() throws {
        func security(_ options: String) throws -> MailSecurity { try emailSink(options).server.security }
        XCTAssertEqual(try security(#"smtp_url = "smtps://mail.example.org:465""#), .implicitTLS)
        XCTAssertEqual(try security(#"smtp_url = "smtp://mail.example.org:587""#), .startTLSRequired)
        XCTAssertEqual(try security(#"smtp_url = "smtp://127.0.0.1:25""#), .startTLSIfOffered)
        XCTAssertEqual(try security("smtp_url = \"smtp://localhost:25\"\nstarttls = true"), .startTLSRequired)
        XCTAssertEqual(try security("smtp_url = \"smtp://[::1]:25\"\nstarttls = false"), .plainLoopback)
        XCTAssertTrue(EmailSink.isLoopback("127.1.2.3") && !EmailSink.isLoopback("128.0.0.1") && !EmailSink.isLoopback("localhost.example.org"))
    }

    func testConfigErrorsNameTheLine() throws {
        let errors = try configErrors(
            """
            [sinks.a]
            type = "email"
            smtp_url = "smtp://mail.example.com:587"
            starttls = false
            from = "t@example.org"
            to = "o@example.org"

            [sinks.b]
            type = "email"
            smtp_url = "smtps://user:pw@mail.example.com"
            from = "t@example.org"
            to = ["o@example.org", "x@example.org\\r\\nBcc: v@example.org"]
            username = "u"
            """)
        let lines = errors.map { "\($0.line ?? 0): \($0.message)" }
        XCTAssertTrue(lines.contains { $0.hasPrefix("4: ") && $0.contains("allowed only to a loopback host") }, "\(lines)")
        XCTAssertEqual(errors.count, 2, "\(lines)")  // one error per sink table: the first one found
        XCTAssertTrue(lines.contains { $0.hasPrefix("10: ") && $0.contains("must not carry credentials") }, "\(lines)")
        let more = try configErrors(
            """
            [sinks.b]
            type = "email"
            smtp_url = "smtps://mail.example.com"
            from = "t@example.org"
            to = ["o@example.org", "x@example.org\\r\\nBcc: v@example.org"]
            """)
        XCTAssertEqual(more.map { $0.line }, [5])
        XCTAssertTrue(more[0].message.contains("line breaks"), "\(more)")
    }

    // MARK: outcome

    func testRepliesMapToTheOutboxCategories() {
        func category(_ e: MailTransportError) -> DeliveryError.Category { EmailSink.judge(e, endpoint: "smtps://m").category }
        XCTAssertEqual(category(.refused(MailReply(code: 451, text: "4.3.0 try later"), step: "the message (DATA)")), .retryable)
        XCTAssertEqual(category(.refused(MailReply(code: 421, text: "closing"), step: "the session")), .retryable)
        XCTAssertEqual(category(.refused(MailReply(code: 454, text: "4.7.0 temporary auth failure"), step: "AUTH")), .retryable)
        XCTAssertEqual(category(.refused(MailReply(code: 550, text: "5.1.1 no such user"), step: "RCPT TO")), .permanent)
        XCTAssertEqual(category(.refused(MailReply(code: 554, text: "5.7.1 spam"), step: "the message (DATA)")), .permanent)
        for code in [530, 534, 535, 538] {
            XCTAssertEqual(category(.refused(MailReply(code: code, text: "auth"), step: "AUTH")), .gone)
        }
        XCTAssertEqual(category(.certificate("unknown CA")), .retryable)
        XCTAssertEqual(category(.tls("no STARTTLS")), .retryable)
        XCTAssertEqual(category(.unreachable("refused")), .retryable)
        XCTAssertEqual(category(.timeout(30)), .retryable)
        let auth = EmailSink.judge(MailTransportError.refused(MailReply(code: 535, text: "5.7.8 bad"), step: "AUTH"), endpoint: "smtps://m:465")
        XCTAssertEqual(auth.message, "smtps://m:465: AUTH refused: 535 5.7.8 bad (authentication failed: check the sink's username and password, then reload)")
    }

    // MARK: helpers

    private func emailSink(_ options: String) throws -> EmailSink {
        var text = "[sinks.mail]\ntype = \"email\"\nfrom = \"Tidings <tidings@Example.ORG>\"\n" + options
        if !options.contains("smtp_url") { text += "\nsmtp_url = \"smtps://mail.example.org\"" }
        if !options.contains("to =") { text += "\nto = \"ops@example.org\"" }
        var sink = try XCTUnwrap(loadConfig(text).sink(named: "mail")?.instance as? EmailSink)
        sink.now = { Date(timeIntervalSince1970: 1_800_000_000) }
        return sink
    }

    /// RFC 2047 B words back to text (adjacent words concatenate).
    private func decodeWords(_ words: [String]) -> String {
        var bytes = Data()
        for w in words {
            guard w.hasPrefix("=?UTF-8?B?"), w.hasSuffix("?="), let d = Data(base64Encoded: String(w.dropFirst(10).dropLast(2))) else {
                XCTFail("not a B word: \(w)")
                return ""
            }
            bytes += d
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func decodeQP(_ text: String) -> String {
        var out = [UInt8]()
        let b = Array(text.replacingOccurrences(of: "=\r\n", with: "").utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "="), i + 2 < b.count, let v = UInt8(String(decoding: b[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) {
                out.append(v)
                i += 3
            } else {
                out.append(b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
