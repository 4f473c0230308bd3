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

/// `provider = "certificate"` (DESIGN §12): targets, libcurl's certinfo, bands with an injected
/// `now`, what makes an event, and a poll against a scripted ``CertificateProbe``.
final class CertificateProviderTests: XCTestCase {
    // A real certificate as libcurl 7.88 (OpenSSL 3.0) reports it through CURLINFO_CERTINFO.
    static let pem = """
        -----BEGIN CERTIFICATE-----
        MIIBrjCCAVWgAwIBAgICEAEwCgYIKoZIzj0EAwIwMjEWMBQGA1UECgwNVGlkaW5n
        cyBUZXN0czEYMBYGA1UEAwwPVGlkaW5ncyBUZXN0IENBMB4XDTI2MTEyNTEzMjY1
        OFoXDTI2MTEyOTE0MjY1OFowDzENMAsGA1UEAwwEc29vbjBZMBMGByqGSM49AgEG
        CCqGSM49AwEHA0IABFuUSKGRTsabtDfgTojWrTOpptpclwcU/dko8pUSp5095D3w
        35NytjOPgWnfMFNmYNWYgb4IVcFPXCN7avrSNMyjfjB8MBoGA1UdEQQTMBGCCWxv
        Y2FsaG9zdIcEfwAAATAJBgNVHRMEAjAAMBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0G
        A1UdDgQWBBRnu+gFRiwiPgvKc1rjUZZT8ZWZ9zAfBgNVHSMEGDAWgBSOkA/HmcVO
        UAPpvgqWz4uoh2XU6DAKBggqhkjOPQQDAgNHADBEAiAnzNuS56jUGLPa62eevZ8j
        scbulLrmETizhxL9WviQPgIgLKlBWx9SsFCC1uBBUAp1DBLr9wi6kMPtbnD+QXiY
        UOk=
        -----END CERTIFICATE-----

        """
    /// `openssl x509 -fingerprint -sha256` of it, without colons.
    static let sha256 = "ec715f6f3b733e8bf4696413a44176edcda5baf09d563896e4cbbf312ef498d1"

    static func peer(
        subject: String = "CN = soon", expire: String = "Nov 29 14:26:58 2026 GMT", pem: String = pem,
        extra: Int = 0
    ) -> PeerCertificates {
        let leaf: [PeerCertificates.Field] = [
            .init("Subject", subject), .init("Issuer", "O = Tidings Tests, CN = Tidings Test CA"), .init("Version", "2"),
            .init("Serial Number", "1001"), .init("Signature Algorithm", "ecdsa-with-SHA256"),
            .init("Start date", "Nov 25 13:26:58 2026 GMT"), .init("Expire date", expire), .init("Cert", pem),
        ]
        return PeerCertificates(chain: [leaf] + Array(repeating: [.init("Subject", "CN = other")], count: extra))
    }

    static func date(_ s: String) -> Date { Timestamp.parse(s)! }
    let target = try! CertificateTarget(parsing: "127.0.0.1:8443")

    // MARK: targets

    func testTargetForms() throws {
        let cases: [(String, CertificateTarget.Mode, String, Int, String, String)] = [
            ("example.com:443", .tls, "example.com", 443, "example.com:443", "https://example.com:443/"),
            ("Example.COM", .tls, "example.com", 443, "example.com:443", "https://example.com:443/"),
            ("https://example.com:8443/", .tls, "example.com", 8443, "example.com:8443", "https://example.com:8443/"),
            ("smtps://mail.example.com", .tls, "mail.example.com", 465, "mail.example.com:465", "https://mail.example.com:465/"),
            ("imaps://mail.example.com", .tls, "mail.example.com", 993, "mail.example.com:993", "https://mail.example.com:993/"),
            ("smtp://mail.example.com:587", .smtpStartTLS, "mail.example.com", 587, "smtp://mail.example.com:587", "smtp://mail.example.com:587/"),
            ("SMTP://mail.example.com", .smtpStartTLS, "mail.example.com", 25, "smtp://mail.example.com:25", "smtp://mail.example.com:25/"),
            ("imap://mail.example.com:143", .imapStartTLS, "mail.example.com", 143, "imap://mail.example.com:143", "imap://mail.example.com:143/"),
            ("imap://mail.example.com", .imapStartTLS, "mail.example.com", 143, "imap://mail.example.com:143", "imap://mail.example.com:143/"),
            ("[::1]:8443", .tls, "::1", 8443, "[::1]:8443", "https://[::1]:8443/"),
            ("imap://[::1]:1143", .imapStartTLS, "::1", 1143, "imap://[::1]:1143", "imap://[::1]:1143/"),
        ]
        for (raw, mode, host, port, key, endpoint) in cases {
            let t = try CertificateTarget(parsing: raw)
            XCTAssertEqual(t.mode, mode, raw)
            XCTAssertEqual(t.host, host, raw)
            XCTAssertEqual(t.port, port, raw)
            XCTAssertEqual(t.key, key, raw)
            XCTAssertEqual(t.endpoint.absoluteString, endpoint, raw)
        }
        XCTAssertEqual(try CertificateTarget(parsing: "example.com:443").link, "https://example.com/")
        XCTAssertNil(try CertificateTarget(parsing: "imap://example.com:143").link)
    }

    func testBadTargets() {
        let bad: [(String, String)] = [
            ("", "empty"), ("ftp://example.com:21", "unknown scheme"), ("example.com:0", "invalid port"),
            ("example.com:65536", "invalid port"), ("example.com:https", "invalid port"), ("example.com/path", "not a host and port"),
            ("user@example.com:443", "not a host and port"), ("::1:443", "more than one ':'"), ("[::1:443", "unclosed"),
            (":443", "no valid host"), ("exa mple.com:443", "no valid host"), ("\u{1b}[31mx:443", "no valid host"),
            ("smtp://mail.example.com:587/x", "not a host and port"),
        ]
        for (raw, why) in bad {
            XCTAssertThrowsError(try CertificateTarget(parsing: raw), raw) { error in
                let message = (error as? CertificateTarget.ParseError)?.message ?? "\(error)"
                XCTAssertTrue(message.contains(why), "\(raw): \(message)")
                XCTAssertFalse(message.contains("\u{1b}"), "no terminal escape is echoed")
            }
        }
    }

    func testConfigErrorsNameEachBadEntryAndLine() throws {
        let errors = try configErrors(
            "",
            plugins: [
                "certs.toml": (
                    """
                    provider = "certificate"
                    targets = [
                      "ok.example.com:443",
                      "ftp://x:21",
                      "x:99999",
                      "ok.example.com:443",
                    ]
                    warn_before = "7d"
                    critical_before = "soon"

                    """, 0o600
                )
            ])
        let text = errors.map(\.description)
        XCTAssertTrue(
            text.contains {
                $0.hasSuffix(
                    "certs.toml:4: source \"certs\": 'targets': \"ftp://x:21\" has an unknown scheme \"ftp\" (use host:port, smtp://host:587 or imap://host:143)"
                )
            }, "\(text)")
        XCTAssertTrue(text.contains { $0.contains("certs.toml:5: ") && $0.contains("invalid port") }, "\(text)")
        XCTAssertTrue(text.contains { $0.contains("certs.toml:6: ") && $0.contains("listed twice") }, "\(text)")
        XCTAssertTrue(text.contains { $0.contains("certs.toml:9: ") && $0.contains("'critical_before'") }, "\(text)")
        XCTAssertEqual(errors.count, 4, "\(text)")

        let order = try configErrors(
            "",
            plugins: [
                "certs.toml": (
                    """
                    provider = "certificate"
                    targets = ["ok.example.com:443"]
                    warn_before = "7d"
                    critical_before = "8d"

                    """, 0o600
                )
            ])
        XCTAssertEqual(order.map(\.description).count, 1)
        XCTAssertTrue(order[0].description.contains("certs.toml:4: ") && order[0].description.contains("must not be longer"), "\(order)")

        let missing = try configErrors("", plugins: ["certs.toml": ("provider = \"certificate\"\n", 0o600)])
        XCTAssertTrue(missing.contains { $0.message.contains("missing required key 'targets'") }, "\(missing)")
        let empty = try configErrors("", plugins: ["certs.toml": ("provider = \"certificate\"\ntargets = []\n", 0o600)])
        XCTAssertTrue(empty.contains { $0.description.contains("certs.toml:2: ") && $0.message.contains("'targets' is empty") }, "\(empty)")
        let number = try configErrors("", plugins: ["certs.toml": ("provider = \"certificate\"\ntargets = 443\n", 0o600)])
        XCTAssertTrue(number.contains { $0.message.contains("must be a list of strings") }, "\(number)")
        let mixed = try configErrors("", plugins: ["certs.toml": ("provider = \"certificate\"\ntargets = [\"a.example.com\", 443]\n", 0o600)])
        XCTAssertTrue(mixed.contains { $0.message.contains("each target must be a string, not an integer") }, "\(mixed)")
    }

    func testDefaults() throws {
        let config = try loadConfig("", plugins: ["certs.toml": ("provider = \"certificate\"\ntargets = [\"a.example.com\"]\n", 0o600)])
        let p = try XCTUnwrap(config.sources.first?.instance as? CertificateProvider)
        XCTAssertEqual(p.warnBefore, 21 * 86400)
        XCTAssertEqual(p.criticalBefore, 7 * 86400)
        XCTAssertEqual(p.targets.map(\.key), ["a.example.com:443"])
        XCTAssertNil(p.caFile)
    }

    // MARK: certinfo

    func testLeafFromCertinfo() throws {
        let leaf = try LeafCertificate(Self.peer())
        XCTAssertEqual(leaf.notAfter, Self.date("2026-11-29T14:26:58Z"))
        XCTAssertEqual(leaf.notBefore, Self.date("2026-11-25T13:26:58Z"))
        XCTAssertEqual(leaf.subject, "CN = soon")
        XCTAssertEqual(leaf.issuer, "O = Tidings Tests, CN = Tidings Test CA")
        XCTAssertEqual(leaf.serial, "1001")
        XCTAssertEqual(leaf.sha256, Self.sha256)
    }

    func testCertinfoDates() {
        XCTAssertEqual(LeafCertificate.date("Mar  1 00:00:00 2027 GMT"), Self.date("2027-03-01T00:00:00Z"))
        XCTAssertEqual(LeafCertificate.date("Dec 31 23:59:59 2049 GMT"), Self.date("2049-12-31T23:59:59Z"))
        XCTAssertEqual(LeafCertificate.date("2027-03-01 00:00:00 GMT"), Self.date("2027-03-01T00:00:00Z"))
        XCTAssertNil(LeafCertificate.date("Foo 1 00:00:00 2027 GMT"))
        XCTAssertNil(LeafCertificate.date("Mar 1 00:00:00 2027 CET"), "a date in another zone is not guessed")
        XCTAssertNil(LeafCertificate.date(""))
        XCTAssertNil(LeafCertificate.date("Feb 40 00:00:00 2027 GMT"))
    }

    func testSerialForms() {
        XCTAssertEqual(LeafCertificate.hex(serial: "0A:1B:2c"), "0a1b2c")
        XCTAssertEqual(LeafCertificate.hex(serial: " 1001 "), "1001")
        XCTAssertEqual(LeafCertificate.hex(serial: "-7f"), "-7f")
    }

    func testUnreadableCertinfoIsAnError() {
        XCTAssertThrowsError(try LeafCertificate(PeerCertificates(chain: [])))
        XCTAssertThrowsError(try LeafCertificate(Self.peer(expire: "whenever")))
        XCTAssertThrowsError(try LeafCertificate(Self.peer(pem: "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----")))
        XCTAssertThrowsError(try LeafCertificate(Self.peer(pem: "no pem")))
    }

    func testHostileSubjectIsCleaned() throws {
        let leaf = try LeafCertificate(Self.peer(subject: "CN = \u{1b}]0;pwned\u{07}evil\u{1b}[2J\n" + String(repeating: "x", count: 5000)))
        XCTAssertFalse(leaf.subject.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }, leaf.subject)
        XCTAssertLessThanOrEqual(leaf.subject.count, 500)
    }

    // MARK: bands and events

    func testBandsByWholeDaysLeft() throws {
        let p = CertificateProvider(targets: [target])
        let leaf = try LeafCertificate(Self.peer())  // expires 2026-11-29T14:26:58Z
        func check(_ now: String, _ days: Int, _ severity: Severity) {
            let item = p.item(target, leaf: leaf, chainLength: 1, verifyError: nil, now: Self.date(now))
            XCTAssertEqual(item.data["days_left"], .number(Double(days)), now)
            XCTAssertEqual(item.severity, severity, now)
        }
        check("2026-09-01T00:00:00Z", 89, .info)
        check("2026-11-08T14:26:58Z", 21, .info)  // exactly 21 days: not below warn_before
        check("2026-11-08T14:26:59Z", 20, .warning)  // a second later: 20 whole days
        check("2026-11-22T14:26:58Z", 7, .warning)
        check("2026-11-22T14:26:59Z", 6, .critical)
        check("2026-11-29T14:26:57Z", 0, .critical)
        check("2026-11-29T14:26:59Z", -1, .critical)  // expired a second ago: rounded down
        check("2026-12-02T00:00:00Z", -3, .critical)
    }

    func testExpiredTitleCountsDaysAgo() throws {
        let p = CertificateProvider(targets: [target])
        let leaf = try LeafCertificate(Self.peer())  // expires 2026-11-29T14:26:58Z
        func title(_ now: String) -> String {
            p.item(target, leaf: leaf, chainLength: 1, verifyError: nil, now: Self.date(now)).title
        }
        XCTAssertEqual(title("2026-11-29T20:00:00Z"), "127.0.0.1:8443: certificate expired less than a day ago (2026-11-29T14:26:58Z)")
        XCTAssertEqual(title("2026-12-01T15:00:00Z"), "127.0.0.1:8443: certificate expired 2 days ago (2026-11-29T14:26:58Z)")
        XCTAssertEqual(title("2026-11-29T10:00:00Z"), "127.0.0.1:8443: certificate expires within a day (2026-11-29T14:26:58Z)")
        XCTAssertEqual(title("2026-11-28T10:00:00Z"), "127.0.0.1:8443: certificate expires in 1 day (2026-11-29T14:26:58Z)")
    }

    func testItemShape() throws {
        let p = CertificateProvider(targets: [target])
        let leaf = try LeafCertificate(Self.peer())
        let item = p.item(target, leaf: leaf, chainLength: 3, verifyError: nil, now: Self.date("2026-11-19T12:00:00Z"))
        XCTAssertEqual(item.key, "127.0.0.1:8443")
        XCTAssertEqual(item.kind, "certificate")
        XCTAssertEqual(item.title, "127.0.0.1:8443: certificate expires in 10 days (2026-11-29T14:26:58Z)")
        XCTAssertEqual(item.severity, .warning)
        XCTAssertEqual(item.data["not_after"], "2026-11-29T14:26:58Z")
        XCTAssertEqual(item.data["not_before"], "2026-11-25T13:26:58Z")
        XCTAssertEqual(item.data["sha256"], .string(Self.sha256))
        XCTAssertEqual(item.data["serial"], "1001")
        XCTAssertEqual(item.data["subject"], "CN = soon")
        XCTAssertEqual(item.data["verified"], true)
        XCTAssertEqual(item.data["chain_length"], 3)
        XCTAssertNil(item.data["reason"])
        XCTAssertNil(item.url)
    }

    func testVerificationFailureIsCriticalWithTheReason() throws {
        let p = CertificateProvider(targets: [target])
        let leaf = try LeafCertificate(Self.peer())
        let now = Self.date("2026-10-01T00:00:00Z")
        let item = p.item(
            target, leaf: leaf, chainLength: 1,
            verifyError: "SSL: no alternative certificate subject name matches target host name '127.0.0.1'", now: now)
        XCTAssertEqual(item.severity, .critical)
        XCTAssertEqual(item.data["reason"], "wrong name")
        XCTAssertEqual(item.data["verified"], false)
        XCTAssertEqual(item.data["days_left"], 59)
        XCTAssertTrue(item.title.hasPrefix("127.0.0.1:8443: certificate does not verify (wrong name), expires in 59 days"), item.title)
        XCTAssertTrue(item.body.contains("no alternative certificate subject name"), item.body)
    }

    func testReasons() {
        let cases = [
            ("SSL certificate problem: certificate has expired", "expired"),
            ("SSL certificate problem: certificate is not yet valid", "not yet valid"),
            ("SSL certificate problem: self-signed certificate", "self-signed"),
            ("SSL certificate problem: self signed certificate in certificate chain", "self-signed"),
            ("SSL certificate problem: unable to get local issuer certificate", "untrusted"),
            ("SSL: no alternative certificate subject name matches target host name 'x'", "wrong name"),
            ("SSL: certificate subject name 'a' does not match target host name 'b'", "wrong name"),
            ("SSL certificate problem: certificate revoked", "revoked"),
            ("SSL certificate problem: something new", "does not verify"),
        ]
        for (message, reason) in cases { XCTAssertEqual(CertificateProvider.reason(of: message), reason, message) }
    }

    /// Exactly a renewal, a new band or a verification failure moves the fingerprint; the days
    /// ticking down inside a band do not.
    func testWhatMovesTheFingerprint() throws {
        let p = CertificateProvider(targets: [target])
        let leaf = try LeafCertificate(Self.peer())
        func item(_ now: String, leaf: LeafCertificate = leaf, error: String? = nil) -> Item {
            p.item(target, leaf: leaf, chainLength: 1, verifyError: error, now: Self.date(now))
        }
        let day60 = item("2026-09-30T14:00:00Z")
        let day59 = item("2026-10-01T14:00:00Z")
        XCTAssertEqual(day60.fingerprint, day59.fingerprint, "a day less inside the info band")
        XCTAssertNotEqual(day60.contentHash, day59.contentHash, "the stored text follows the count")
        let warn20 = item("2026-11-09T00:00:00Z")
        let warn19 = item("2026-11-10T00:00:00Z")
        XCTAssertEqual(warn20.fingerprint, warn19.fingerprint)
        XCTAssertNotEqual(day59.fingerprint, warn20.fingerprint, "info → warning")
        let crit6 = item("2026-11-23T00:00:00Z")
        XCTAssertNotEqual(warn19.fingerprint, crit6.fingerprint, "warning → critical")

        var renewed = leaf
        renewed.sha256 = String(repeating: "ab", count: 32)
        XCTAssertNotEqual(item("2026-09-30T14:00:00Z", leaf: renewed).fingerprint, day60.fingerprint, "a renewal")

        let untrusted = item("2026-09-30T14:00:00Z", error: "unable to get local issuer certificate")
        XCTAssertNotEqual(untrusted.fingerprint, day60.fingerprint, "a verification failure")
        XCTAssertEqual(untrusted.fingerprint, item("2026-10-01T14:00:00Z", error: "unable to get local issuer certificate").fingerprint)
        XCTAssertNotEqual(
            untrusted.fingerprint, item("2026-09-30T14:00:00Z", error: "certificate has expired").fingerprint,
            "another reason")
    }

    // MARK: polls

    func context(_ probe: ScriptedProbe) -> PollContext {
        PollContext(source: "certs", http: probe, timeout: 5, logger: Logger(label: "test"), now: Self.date("2026-11-19T12:00:00Z"))
    }

    func testAFailedVerificationIsReadAgainWithoutIt() async throws {
        let probe = ScriptedProbe { request in
            if request.verify { throw CertificateProbeError.verification("SSL certificate problem: self-signed certificate") }
            return Self.peer()
        }
        let p = CertificateProvider(targets: [target], caFile: "/ca.pem")
        guard case .snapshot(let items, _) = try await p.poll(context(probe)).content else { return XCTFail() }
        XCTAssertEqual(items.map(\.severity), [.critical])
        XCTAssertEqual(items.first?.data["reason"], "self-signed")
        XCTAssertEqual(probe.requests.map(\.verify), [true, false])
        XCTAssertEqual(probe.requests.map(\.caFile), ["/ca.pem", "/ca.pem"])
        XCTAssertEqual(probe.requests.first?.endpoint.absoluteString, "https://127.0.0.1:8443/")
    }

    func testStartTLSTargetsReachTheProbeAsTheirScheme() async throws {
        let probe = ScriptedProbe { _ in Self.peer() }
        let p = CertificateProvider(targets: [
            try CertificateTarget(parsing: "imap://127.0.0.1:1143"),
            try CertificateTarget(parsing: "smtp://127.0.0.1:2525"),
        ])
        guard case .snapshot(let items, _) = try await p.poll(context(probe)).content else { return XCTFail() }
        XCTAssertEqual(items.map(\.key), ["imap://127.0.0.1:1143", "smtp://127.0.0.1:2525"])
        XCTAssertEqual(Set(probe.requests.map(\.endpoint.absoluteString)), ["imap://127.0.0.1:1143/", "smtp://127.0.0.1:2525/"])
        XCTAssertEqual(probe.requests.map(\.verify), [true, true])
    }

    func testAnUnreachableTargetFailsThePollNamingIt() async throws {
        let down = try CertificateTarget(parsing: "127.0.0.1:9")
        let probe = ScriptedProbe { request in
            if request.endpoint.port == 9 { throw CertificateProbeError.unreachable("Failed to connect to 127.0.0.1 port 9: Connection refused") }
            return Self.peer()
        }
        let p = CertificateProvider(targets: [target, down])
        do {
            _ = try await p.poll(context(probe))
            XCTFail("a poll with an unreachable target succeeded")
        } catch let e as PollError {
            XCTAssertEqual(e.category, .transient)
            XCTAssertEqual(e.message, "127.0.0.1:9: Failed to connect to 127.0.0.1 port 9: Connection refused")
        }
    }

    func testGarbageCertinfoFailsThePoll() async throws {
        let probe = ScriptedProbe { _ in PeerCertificates(chain: [[.init("Subject", "CN = x")]]) }
        let p = CertificateProvider(targets: [target])
        do {
            _ = try await p.poll(context(probe))
            XCTFail("no expiry date, yet a snapshot")
        } catch let e as PollError {
            XCTAssertEqual(e.message, "127.0.0.1:8443: the certificate has no expiry date")
        }
    }
}

/// A ``CertificateProbe`` (and, as the real one, the poll's HTTP client) that answers from a script.
final class ScriptedProbe: HTTPClient, CertificateProbe, @unchecked Sendable {
    let answer: @Sendable (CertificateRequest) throws -> PeerCertificates
    private let log = Mutex<[CertificateRequest]>([])
    var requests: [CertificateRequest] { log.withLock { $0 } }

    init(_ answer: @escaping @Sendable (CertificateRequest) throws -> PeerCertificates) { self.answer = answer }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        throw HTTPClientError.transport("no HTTP here")
    }

    func certificates(_ request: CertificateRequest) async throws -> PeerCertificates {
        log.withLock { $0.append(request) }
        return try answer(request)
    }
}
