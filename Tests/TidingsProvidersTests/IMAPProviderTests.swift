import Foundation
import Logging
import Synchronization
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

/// `provider = "imap"` (DESIGN §12): header and body decoding, the IMAP answer parser, and what
/// one poll sends and makes of the answers (through a scripted ``MailboxSession``; the real
/// server is Tests/e2e/test_imap.py).
final class IMAPProviderTests: XCTestCase {
    // MARK: RFC 2047 encoded words

    func testEncodedWordsQAndBInAnyCharset() {
        XCTAssertEqual(MailText.decodeHeader(Array("=?utf-8?q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=".utf8)), "Grüße aus Köln")
        XCTAssertEqual(MailText.decodeHeader(Array("=?ISO-8859-1?B?SGVsbG8gV/ZybGQ=?=".utf8)), "Hello Wörld")
        XCTAssertEqual(MailText.decodeHeader(Array("=?iso-8859-1?Q?caf=E9?= time".utf8)), "café time")
        // Whitespace between two encoded words is dropped; between a word and text it stays.
        XCTAssertEqual(MailText.decodeHeader(Array("=?UTF-8?B?SGVs?=\r\n =?UTF-8?B?bG8=?= world".utf8)), "Hello world")
        XCTAssertEqual(MailText.decodeHeader(Array("Re: =?utf-8?Q?na=C3=AFve?=".utf8)), "Re: naïve")
        // iconv charsets: windows-1252 (the euro sign), KOI8-R, Shift_JIS; a language tag (RFC 2231).
        XCTAssertEqual(MailText.decodeHeader(Array("=?windows-1252?Q?=80_5?=".utf8)), "€ 5")
        XCTAssertEqual(MailText.decodeHeader(Array("=?koi8-r?B?8NLJ18XU?=".utf8)), "Привет")
        XCTAssertEqual(MailText.decodeHeader(Array("=?Shift_JIS?B?k/qWe4zq?=".utf8)), "日本語")
        XCTAssertEqual(MailText.decodeHeader(Array("=?utf-8*en?q?hi?=".utf8)), "hi")
        // Not encoded words: kept as written.
        XCTAssertEqual(MailText.decodeHeader(Array("=?utf-8?x?abc?= and =? plain".utf8)), "=?utf-8?x?abc?= and =? plain")
        // An unknown charset: the bytes as UTF-8, never a failure.
        XCTAssertEqual(MailText.decodeHeader(Array("=?x-no-such-charset?q?ok?=".utf8)), "ok")
        // Raw 8-bit headers: UTF-8 when valid, else Latin-1.
        XCTAssertEqual(MailText.decodeHeader(Array("Grüße".utf8)), "Grüße")
        XCTAssertEqual(MailText.decodeHeader([0x63, 0x61, 0x66, 0xE9]), "café")
    }

    func testHeaderTextHasNoTerminalEscapesOrLineBreaks() {
        // An escape sequence raw, and one hidden in an encoded word.
        let raw = Array("\u{1B}]0;owned\u{07}Invoice \u{1B}[31mdue".utf8)
        XCTAssertEqual(MailText.decodeHeader(raw), "]0;owned Invoice [31mdue")
        XCTAssertEqual(MailText.decodeHeader(Array("=?utf-8?q?a=1B[2Jb=0D=0Ac?=".utf8)), "a [2Jb c")
    }

    func testHeaderFieldsAreUnfoldedAndFirstWins() {
        let fields = MailText.headerFields(Array("Subject: one\r\n  two\r\nFROM: a@b\r\nSubject: later\r\n\r\nBody: no\r\n".utf8))
        XCTAssertEqual(fields["subject"].map { MailText.decodeHeader($0) }, "one two")
        XCTAssertEqual(fields["from"].map { MailText.decodeHeader($0) }, "a@b")
        XCTAssertNil(fields["body"])
    }

    // MARK: Transfer encodings and charsets

    func testQuotedPrintable() {
        XCTAssertEqual(String(decoding: MailText.quotedPrintable(Array("caf=C3=A9 au=\r\n lait=3D=\nok".utf8)), as: UTF8.self), "café au lait=ok")
        // Lower-case hex, and a cut inside an escape at the end.
        XCTAssertEqual(String(decoding: MailText.quotedPrintable(Array("a=c3=a9b=C".utf8)), as: UTF8.self), "aéb")
        XCTAssertEqual(String(decoding: MailText.quotedPrintable(Array("a = b =zz".utf8)), as: UTF8.self), "a = b =zz")
    }

    func testBase64() {
        XCTAssertEqual(String(decoding: MailText.base64(Array("SGVs\r\nbG8g\r\nd29y bGQ=".utf8)), as: UTF8.self), "Hello world")
        // A body cut mid-quantum: what is complete is kept.
        XCTAssertEqual(String(decoding: MailText.base64(Array("SGVsbG8gd29y".utf8)), as: UTF8.self), "Hello wor")
        XCTAssertEqual(String(decoding: MailText.base64(Array("SGVsbG8gd2".utf8)), as: UTF8.self), "Hello ")
    }

    func testCharsets() {
        XCTAssertEqual(MailText.text([0x4B, 0xF6, 0x6C, 0x6E], charset: "ISO-8859-1"), "Köln")
        XCTAssertEqual(MailText.text([0xA4], charset: "iso-8859-15"), "€")
        XCTAssertEqual(MailText.text([0x93, 0xFA, 0x96, 0x7B], charset: "\"shift_jis\""), "日本")
        // UTF-8 cut inside a character (the text part is read in part): the tail is dropped.
        XCTAssertEqual(MailText.text(Array(Array("Grü".utf8).dropLast()), charset: nil, cut: true), "Gr")
        XCTAssertEqual(MailText.text(Array(Array("a🌳".utf8).dropLast()), charset: "UTF-8", cut: true), "a")
        XCTAssertEqual(MailText.text(Array("Grü".utf8), charset: nil, cut: true), "Grü")
        // Invalid bytes in an iconv charset are replaced, the rest is kept.
        XCTAssertEqual(MailText.text([0x61, 0x82, 0xA0, 0x62], charset: "shift_jis").first, "a")
    }

    func testBodyTextFollowsMultipartToThePlainPart() {
        let body = """
            This is a multi-part message in MIME format.\r
            --outer\r
            Content-Type: multipart/alternative; boundary="inner"\r
            \r
            --inner\r
            Content-Type: text/html; charset=utf-8\r
            \r
            <p>HTML version</p>\r
            --inner\r
            Content-Type: text/plain; charset=iso-8859-1\r
            Content-Transfer-Encoding: quoted-printable\r
            \r
            Hall=E5 d=E4r,\r
            see the attachment.\r
            --inner--\r
            --outer\r
            Content-Type: application/pdf\r
            Content-Disposition: attachment; filename="x.pdf"\r
            Content-Transfer-Encoding: base64\r
            \r
            JVBERi0xLjQK\r
            --outer--\r

            """
        let text = MailText.bodyText(Array(body.utf8), contentType: Array("multipart/mixed; boundary=outer".utf8), transferEncoding: nil)
        XCTAssertEqual(text.split(whereSeparator: \.isNewline), ["Hallå där,", "see the attachment."])
    }

    func testBodyTextHTMLOnlyAndBase64() {
        let html = Data("<html><head><style>p{}</style></head><body><p>Hello <b>there</b> &amp; welcome</p><p>Line 2</p></body></html>".utf8)
            .base64EncodedString()
        let text = MailText.bodyText(Array(html.utf8), contentType: Array("text/html; charset=\"UTF-8\"".utf8), transferEncoding: Array(" Base64".utf8))
        XCTAssertEqual(text, "Hello there & welcome\nLine 2")
        // A multipart cut before its end (the text is read in part) still yields what is there.
        let cut = "--b\r\nContent-Type: text/plain\r\n\r\nfirst line\r\nsecond li"
        XCTAssertEqual(
            MailText.bodyText(Array(cut.utf8), contentType: Array("multipart/alternative; boundary=b".utf8), transferEncoding: nil)
                .split(whereSeparator: \.isNewline), ["first line", "second li"])
        // Not text: nothing (an image is no preview).
        XCTAssertEqual(MailText.bodyText(Array("GIF89a".utf8), contentType: Array("image/gif".utf8), transferEncoding: nil), "")
    }

    // MARK: The IMAP answer parser

    static func fetchAnswer(uid: UInt32, header: String, text: String, spacing: String = " ") -> String {
        "* \(uid) FETCH (UID\(spacing)\(uid) RFC822.SIZE \(header.utf8.count + text.utf8.count) "
            + "BODY[HEADER.FIELDS (SUBJECT FROM TO DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING)] {\(header.utf8.count)}\r\n\(header)"
            + "\(spacing)BODY[TEXT]<0> {\(text.utf8.count)}\r\n\(text))\r\n"
    }

    func testFetchParserReadsLiteralsExactly() throws {
        // The literal holds a line that looks like a response and a ")" : only the byte count decides.
        let header = "Subject: =?utf-8?q?caf=C3=A9?=\r\nFrom: \"Bob\" <bob@example.org>\r\n\r\n"
        let text = "* 9 FETCH (UID 99)\r\n) trailing paren\r\n"
        let answer =
            "* OK [CAPABILITY IMAP4rev1] ready\r\nA001 OK Logged in\r\n" + Self.fetchAnswer(uid: 7, header: header, text: text) + "A004 OK Fetch completed.\r\n"
        let responses = try IMAPResponseParser.parse(Data(answer.utf8))
        XCTAssertEqual(responses.count, 2)
        XCTAssertEqual(responses.first, .capabilities(["IMAP4REV1"]))
        guard case .fetch(let a) = responses.last else { return XCTFail("\(responses)") }
        XCTAssertEqual(a["UID"], .atom("7"))
        XCTAssertEqual(a["BODY[TEXT]"], .string(Array(text.utf8)))
        XCTAssertEqual(
            a.keys.sorted(),
            ["BODY[HEADER.FIELDS (SUBJECT FROM TO DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING)]", "BODY[TEXT]", "RFC822.SIZE", "UID"])
    }

    func testFetchParserOddSpacingCaseQuotedAndNil() throws {
        let answer =
            "*  3   fetch   ( uid  12 body[header.fields (subject)]  \"Subject: a \\\"quoted\\\" \\\\ one\"  Body[Text]<0> NIL  FLAGS (\\Seen  \\Flagged) )\r\n"
        let responses = try IMAPResponseParser.parse(Data(answer.utf8))
        guard case .fetch(let a)? = responses.first else { return XCTFail("\(responses)") }
        XCTAssertEqual(a["UID"]?.number, 12)
        XCTAssertEqual(a["BODY[HEADER.FIELDS (SUBJECT)]"]?.bytes.map { String(decoding: $0, as: UTF8.self) }, "Subject: a \"quoted\" \\ one")
        XCTAssertEqual(a["BODY[TEXT]"], .null)
        XCTAssertEqual(a["FLAGS"], .list([.atom("\\Seen"), .atom("\\Flagged")]))
    }

    func testUntaggedStatusAndSearch() throws {
        let answer = """
            * FLAGS (\\Answered \\Seen)\r
            * OK [PERMANENTFLAGS ()] Read-only mailbox.\r
            * 2 EXISTS\r
            * OK [UIDVALIDITY 1795699802] UIDs valid\r
            * SEARCH 4 9  17\r
            * SEARCH\r
            A003 OK [READ-ONLY] Examine completed\r

            """
        XCTAssertEqual(try IMAPResponseParser.parse(Data(answer.utf8)), [.exists(2), .uidValidity(1_795_699_802), .search([4, 9, 17]), .search([])])
    }

    func testHostileAnswersFailClearly() {
        // Cut inside a literal (a server that stopped mid-answer).
        XCTAssertThrowsError(try IMAPResponseParser.parse(Data("* 1 FETCH (UID 1 BODY[TEXT] {500}\r\nshort)\r\n".utf8)))
        // A literal claiming more bytes than exist, with a huge count.
        XCTAssertThrowsError(try IMAPResponseParser.parse(Data("* 1 FETCH (UID 1 BODY[TEXT] {99999999999999999999}\r\n".utf8)))
        // Nesting far deeper than any FETCH: refused, no stack overflow.
        let deep = "* 1 FETCH (" + String(repeating: "(", count: 100_000) + "\r\n"
        XCTAssertThrowsError(try IMAPResponseParser.parse(Data(deep.utf8)))
        XCTAssertThrowsError(try IMAPResponseParser.parse(Data("* 1 FETCH (UID 1 \"unterminated\r\n".utf8)))
    }

    func testSequenceSetAndMailboxNames() {
        XCTAssertEqual(IMAPSyntax.sequenceSet([5, 1, 2, 3, 9, 10, 7]), "1:3,5,7,9:10")
        XCTAssertEqual(IMAPSyntax.mailboxName("Entwürfe"), "Entw&APw-rfe")
        XCTAssertEqual(IMAPSyntax.mailboxName("A&B"), "A&-B")
        XCTAssertEqual(IMAPSyntax.mailboxName("台北"), "&U,BTFw-")
        XCTAssertEqual(IMAPSyntax.quoted("a\"b\\c"), "\"a\\\"b\\\\c\"")
        XCTAssertNil(IMAPSyntax.quoted("a\r\nb"))
    }

    // MARK: One poll

    func provider(readLimit: Int = IMAPProvider.defaultReadLimit, watchLimit: Int = IMAPProvider.defaultWatchLimit) -> IMAPProvider {
        IMAPProvider(
            server: URL(string: "imaps://127.0.0.1:993/")!, security: .implicitTLS, mailbox: "INBOX", username: "me",
            password: Secret("unit-test-imap-password"), readLimit: readLimit, watchLimit: watchLimit)
    }

    func context(_ reader: ScriptedMailbox, etag: String? = nil) -> PollContext {
        PollContext(source: "mail", http: NoHTTP(), validators: Validators(etag: etag), logger: Logger(label: "test"), mailbox: reader)
    }

    func testPollExaminesSearchesAndPeeks() async throws {
        let header =
            "Subject: =?utf-8?B?8J+Ms8O8?= Hi\r\nFrom: =?utf-8?q?J=C3=B6rg?= <j@example.org>\r\nTo: me@example.org\r\n"
            + "Date: Tue, 10 Jun 2003 04:00:00 +0200\r\nMessage-ID: <abc@example.org>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
        let reader = ScriptedMailbox { command in
            if command.hasPrefix("EXAMINE") { return "* OK [UIDVALIDITY 77] ok\r\nA1 OK [READ-ONLY] done\r\n" }
            if command.hasPrefix("UID SEARCH") { return "* SEARCH 5 8\r\nA2 OK\r\n" }
            return Self.fetchAnswer(uid: 8, header: header, text: "line one\r\n\r\n\u{1B}[2Jline two\r\n")
                + Self.fetchAnswer(uid: 5, header: "Subject: older\r\n\r\n", text: "") + "A3 OK\r\n"
        }
        let result = try await provider().poll(context(reader))
        XCTAssertEqual(
            reader.commands,
            [
                "EXAMINE \"INBOX\"", "UID SEARCH UNSEEN",
                "UID FETCH 5,8 (UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (SUBJECT FROM TO DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING)]<0.2048> BODY.PEEK[TEXT]<0.4096>)",
            ])
        XCTAssertTrue(reader.closed)
        guard case .snapshot(let items, let validators) = result.content else { return XCTFail("\(result)") }
        XCTAssertEqual(validators.etag, "uidvalidity 77")
        XCTAssertEqual(items.map(\.key), ["77/8", "77/5"])
        XCTAssertEqual(items[0].kind, "mail")
        XCTAssertEqual(items[0].title, "🌳ü Hi")
        XCTAssertEqual(items[0].body, "From: Jörg <j@example.org>\n\nline one\n[2Jline two")
        XCTAssertEqual(items[0].data["from"], "Jörg <j@example.org>")
        XCTAssertEqual(items[0].data["to"], "me@example.org")
        XCTAssertEqual(items[0].data["date"], "2003-06-10T02:00:00Z")
        XCTAssertEqual(items[0].data["message_id"], "abc@example.org")
        XCTAssertEqual(items[1].title, "older")
    }

    func testNewUIDValidityIsARebaseline() async throws {
        let reader = ScriptedMailbox { command in
            if command.hasPrefix("EXAMINE") { return "* OK [UIDVALIDITY 900] ok\r\n" }
            if command.hasPrefix("UID SEARCH") { return "* SEARCH\r\n" }
            return ""
        }
        guard case .rebaseline(_, let v) = try await provider().poll(context(reader, etag: "uidvalidity 77")).content else { return XCTFail() }
        XCTAssertEqual(v.etag, "uidvalidity 900")
        guard case .snapshot = try await provider().poll(context(reader, etag: "uidvalidity 900")).content else { return XCTFail() }
        guard case .snapshot = try await provider().poll(context(reader)).content else { return XCTFail() }
    }

    func testAHundredThousandMatchesAreCutNotFetched() async throws {
        let search = "* SEARCH " + (1...100_000).map(String.init).joined(separator: " ") + "\r\n"
        let reader = ScriptedMailbox { command in
            if command.hasPrefix("EXAMINE") { return "* OK [UIDVALIDITY 1] ok\r\n" }
            if command.hasPrefix("UID SEARCH") { return search }
            return ""
        }
        guard case .snapshot(let items, _) = try await provider().poll(context(reader)).content else { return XCTFail() }
        XCTAssertEqual(items.count, IMAPProvider.defaultWatchLimit)
        XCTAssertEqual(items.first?.key, "1/100000")
        XCTAssertEqual(reader.commands.count, 2 + 13)  // EXAMINE, SEARCH, 200 messages in batches of 16
        XCTAssertEqual(
            reader.commands.last,
            "UID FETCH 99993:100000 (UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (SUBJECT FROM TO DATE MESSAGE-ID CONTENT-TYPE CONTENT-TRANSFER-ENCODING)]<0.2048> BODY.PEEK[TEXT]<0.4096>)"
        )
    }

    func testESEARCHRangesWhenTheServerHasIt() async throws {
        XCTAssertEqual(
            try IMAPResponseParser.parse(Data("* ESEARCH (TAG \"A3\") UID ALL 4,1:2,9:7 COUNT 6\r\n* ESEARCH (TAG \"A4\") UID\r\n".utf8)),
            [.esearch([4...4, 1...2, 7...9]), .esearch([])])
        XCTAssertEqual(MatchingUIDs([4...4, 1...2, 7...9, 3...3]).ranges, [1...4, 7...9])
        XCTAssertEqual(MatchingUIDs([1...4_000_000_000]).newest(3), [3_999_999_998, 3_999_999_999, 4_000_000_000])
        XCTAssertEqual(MatchingUIDs([1...2, 5...6]).newest(3), [2, 5, 6])
        XCTAssertEqual(MatchingUIDs([1...2, 5...6]).newest(10), [1, 2, 5, 6])
        XCTAssertEqual(MatchingUIDs([1...4_000_000_000]).count, 4_000_000_000)

        let reader = ScriptedMailbox { command in
            if command.hasPrefix("EXAMINE") {
                return
                    "* OK [CAPABILITY IMAP4rev1 LITERAL+] ready\r\n* CAPABILITY IMAP4rev1 ESEARCH CONDSTORE\r\nA2 OK Logged in\r\n* OK [UIDVALIDITY 3] ok\r\n"
            }
            if command.hasPrefix("UID SEARCH") { return "* ESEARCH (TAG \"A4\") UID ALL 1:4000000000\r\n" }
            return ""
        }
        guard case .snapshot(let items, _) = try await provider(readLimit: 2, watchLimit: 5).poll(context(reader)).content else { return XCTFail() }
        XCTAssertEqual(reader.commands[1], "UID SEARCH RETURN (ALL) UNSEEN")
        XCTAssertEqual(items.map(\.key), (3_999_999_996...4_000_000_000).reversed().map { "3/\($0)" })
        XCTAssertTrue(reader.commands[2].hasPrefix("UID FETCH 3999999999:4000000000 "), reader.commands[2])
    }

    func testLoginRefusedIsAuthFailedAndOtherErrorsAreTransient() async throws {
        for (error, category) in [
            (MailboxError.loginRefused("NO [AUTHENTICATIONFAILED] Authentication failed."), PollError.Category.auth),
            (.unreachable("Failed to connect"), .transient), (.timeout(30), .transient),
            (.refused(command: "EXAMINE", text: "NO Mailbox doesn't exist"), .transient),
        ] {
            let reader = ScriptedMailbox { _ in throw error }
            do {
                _ = try await provider().poll(context(reader))
                XCTFail("no error")
            } catch let e as PollError {
                XCTAssertEqual(e.category, category, "\(error)")
                XCTAssertFalse(e.message.contains("unit-test-imap-password"))
            }
            XCTAssertTrue(reader.closed)
        }
    }

    // MARK: Configuration

    func testConfig() throws {
        let c = try loadConfig(
            """
            [sources.mail]
            provider = "imap"
            url = "imap://127.0.0.1:1143/Lists/Entw%C3%BCrfe"
            username = "me"
            password = "imap-config-test-pw"
            search = "UNSEEN FROM \\"boss\\""
            """)
        let p = try XCTUnwrap(c.sources[0].instance as? IMAPProvider)
        XCTAssertEqual(p.server.absoluteString, "imap://127.0.0.1:1143/")
        XCTAssertEqual(p.mailbox, "Lists/Entwürfe")
        XCTAssertEqual(p.security, .startTLSIfOffered)
        XCTAssertEqual(p.search, "UNSEEN FROM \"boss\"")
        let imaps = try XCTUnwrap(
            try loadConfig(
                """
                [sources.mail]
                provider = "imap"
                url = "imaps://mail.example.org"
                username = "me"
                password = "imap-config-test-pw"
                """
            ).sources[0].instance as? IMAPProvider)
        XCTAssertEqual(imaps.mailbox, "INBOX")
        XCTAssertEqual(imaps.security, .implicitTLS)
        XCTAssertEqual(imaps.search, "UNSEEN")

        for (line, error) in [
            ("url = \"https://mail.example.org/INBOX\"", "'url' must be imaps://"),
            ("url = \"imaps://me:pw@mail.example.org/INBOX\"", "must not carry credentials"),
            ("url = \"imaps://mail.example.org/INBOX;UID=3\"", "mailbox only"),
            ("url = \"imap://mail.example.org/INBOX\"\nstarttls = false", "allowed only to a loopback host"),
            ("url = \"imaps://mail.example.org/INBOX\"\nstarttls = true", "'starttls' is for imap://"),
        ] {
            let errors = try configErrors(
                """
                [sources.mail]
                provider = "imap"
                username = "me"
                password = "imap-config-test-pw"
                \(line)
                """)
            XCTAssertEqual(errors.count, 1, "\(line): \(errors)")
            XCTAssertTrue(errors.first?.message.contains(error) ?? false, "\(errors)")
            XCTAssertGreaterThanOrEqual(errors.first?.line ?? 0, 5, "\(errors)")
        }
    }
}

/// A mailbox session that answers from a script and records the commands.
final class ScriptedMailbox: MailboxReader, MailboxSession, @unchecked Sendable {
    let answer: @Sendable (String) throws -> String
    private let log = Mutex<([String], Bool)>(([], false))
    init(_ answer: @escaping @Sendable (String) throws -> String) { self.answer = answer }

    var commands: [String] { log.withLock { $0.0 } }
    var closed: Bool { log.withLock { $0.1 } }

    func open(_ server: MailboxServer) async throws -> any MailboxSession { self }
    func command(_ command: String, limit: Int) async throws -> Data {
        log.withLock { $0.0.append(command) }
        return Data(try answer(command).utf8)
    }
    func close() async { log.withLock { $0.1 = true } }
}

private struct NoHTTP: HTTPClient {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse { throw HTTPClientError.transport("no HTTP in this test") }
}
