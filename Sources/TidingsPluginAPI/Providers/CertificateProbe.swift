import FoundationEssentials
import TidingsCrypto

/// Reads the certificates a TLS server presents, for providers that watch certificates. The
/// core has no sockets: the process's one HTTP client (libcurl, ``PollContext/http``) also
/// implements this port, and ``PollContext/certificates`` finds it there, as the mail sink finds
/// its ``MailTransport``.
package protocol CertificateProbe: Sendable {
    /// Connects to `request.endpoint`, completes the TLS handshake (after STARTTLS for
    /// `smtp://` and `imap://`), sends no request and hangs up. Throws a
    /// ``CertificateProbeError``.
    func certificates(_ request: CertificateRequest) async throws -> PeerCertificates
}

/// One handshake for ``CertificateProbe/certificates(_:)``.
package struct CertificateRequest: Sendable, Equatable {
    /// `https://host:port/` (TLS from the first byte, any TLS service), `smtp://host:port/` or
    /// `imap://host:port/` (STARTTLS required).
    package var endpoint: URL
    /// Verify the chain and the host name (false: only read the certificates).
    package var verify: Bool
    /// A PEM file of certificate authorities to trust instead of the system's.
    package var caFile: String?
    /// Whole-handshake deadline, seconds.
    package var timeout: TimeInterval

    package init(endpoint: URL, verify: Bool, caFile: String? = nil, timeout: TimeInterval) {
        self.endpoint = endpoint
        self.verify = verify
        self.caFile = caFile
        self.timeout = timeout
    }
}

/// The chain a server presented, leaf first: each certificate as the `Name: value` fields
/// libcurl's `CURLINFO_CERTINFO` reports (`Subject`, `Issuer`, `Serial Number`, `Start date`,
/// `Expire date`, `Cert` (PEM), …), in order.
package struct PeerCertificates: Sendable, Equatable {
    package var chain: [[Field]]
    /// How many certificates the server sent (``chain`` may keep fewer: see the probe's limits).
    package var count: Int

    package struct Field: Sendable, Equatable {
        package var name: String
        package var value: String
        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    package init(chain: [[Field]], count: Int? = nil) {
        self.chain = chain
        self.count = count ?? chain.count
    }

    /// The first value of field `name` (case-insensitive) of certificate `index`.
    package func field(_ name: String, of index: Int = 0) -> String? {
        guard chain.indices.contains(index) else { return nil }
        return chain[index].first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// Why a handshake gave no certificates. Messages are the TLS library's, redacted.
package enum CertificateProbeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The handshake worked but the certificate does not verify (expired, wrong name, unknown
    /// issuer, self-signed); only with ``CertificateRequest/verify``.
    case verification(String)
    /// No connection, a refused STARTTLS, a broken or non-TLS answer.
    case unreachable(String)
    /// The deadline passed.
    case timeout(TimeInterval)
    /// A local problem (an unreadable `ca_file`).
    case local(String)

    package var description: String {
        switch self {
        case .verification(let m): return "certificate does not verify: \(m)"
        case .unreachable(let m): return m
        case .timeout(let s): return "no TLS handshake within \(DurationParser.format(s))"
        case .local(let m): return m
        }
    }
}

extension PollContext {
    /// The process's ``CertificateProbe`` (its HTTP client), or nil in a build without one.
    package var certificates: (any CertificateProbe)? { http as? any CertificateProbe }
}

extension Fingerprint {
    /// The full SHA-256 of `data`, lower-case hex (a certificate's fingerprint is of its DER bytes).
    package static func sha256(_ data: Data) -> String { hexString(SHA256.hash(data)) }
}
