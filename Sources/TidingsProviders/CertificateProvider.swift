import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "certificate"`: the leaf certificate of TLS servers, one item of kind
/// `certificate` per target (DESIGN §12).
///
/// ```toml
/// provider = "certificate"
/// targets = ["example.com:443", "smtp://mail.example.com:587", "imap://mail.example.com:143"]
/// warn_before = "21d"
/// critical_before = "7d"
/// ca_file = "/etc/ssl/private-ca.pem"   # trust this CA instead of the system's
/// ```
/// Each target is checked with verification (chain and host name) on; when that fails the
/// reason is kept and the certificate read again without verification, so its dates are still
/// known. The fingerprint is the certificate's SHA-256, its band (info, warning, critical by
/// days left) and why it does not verify: a renewal, a new band or a verification failure is
/// `changed`; the days ticking down inside a band are not. A target that cannot be reached
/// fails the poll (no item is reported removed because of it).
package struct CertificateProvider: Provider {
    package var targets: [CertificateTarget]
    package var warnBefore: TimeInterval
    package var criticalBefore: TimeInterval
    package var caFile: String?

    package static let defaultWarnBefore: TimeInterval = 21 * 86400
    package static let defaultCriticalBefore: TimeInterval = 7 * 86400

    package init(
        targets: [CertificateTarget], warnBefore: TimeInterval = CertificateProvider.defaultWarnBefore,
        criticalBefore: TimeInterval = CertificateProvider.defaultCriticalBefore, caFile: String? = nil
    ) {
        self.targets = targets
        self.warnBefore = warnBefore
        self.criticalBefore = criticalBefore
        self.caFile = caFile
    }

    /// One host for `max_per_host` when every target is on it.
    package var host: String? {
        let hosts = Set(targets.map(\.host))
        return hosts.count == 1 ? hosts.first : nil
    }

    package static let factory = ProviderFactory(name: "certificate", summary: "TLS certificate expiry and validity") { o, _, _ in
        var errors: [ConfigError] = []
        var targets: [CertificateTarget] = []
        func collect<T>(_ body: () throws -> T?) -> T? {
            do { return try body() } catch let e as ConfigError { errors.append(e) } catch let e as ConfigErrors {
                errors += e.errors
            } catch { errors.append(o.error(nil, "\(o.what): \(error)")) }
            return nil
        }
        if let node = o.table["targets"] {
            o.markConsumed("targets")
            var entries: [ConfigNode] = []
            switch node.value {
            case .array(let list) where list.isEmpty:
                errors.append(o.error("targets", "\(o.what): 'targets' is empty: list at least one \"host:port\""))
            case .array(let list): entries = list
            case .string: entries = [node]
            default:
                errors.append(o.error("targets", "\(o.what): 'targets' must be a list of strings like \"example.com:443\", not \(node.typeName)"))
            }
            var seen: Set<String> = []
            let lines = Self.elementLines(
                file: o.file, from: node.line,
                entries.map { entry -> String? in
                    if case .string(let s) = entry.value { return s } else { return nil }
                })
            for (entry, elementLine) in zip(entries, lines) {
                let line = elementLine ?? entry.line ?? node.line
                guard case .string(let text) = entry.value else {
                    errors.append(ConfigError(file: o.file, line: line, "\(o.what): 'targets': each target must be a string, not \(entry.typeName)"))
                    continue
                }
                do {
                    let target = try CertificateTarget(parsing: text)
                    if seen.insert(target.key).inserted {
                        targets.append(target)
                    } else {
                        errors.append(ConfigError(file: o.file, line: line, "\(o.what): 'targets': \(target.key) is listed twice"))
                    }
                } catch let e as CertificateTarget.ParseError {
                    errors.append(ConfigError(file: o.file, line: line, "\(o.what): 'targets': \(e.message)"))
                }
            }
        } else {
            errors.append(o.error(nil, "\(o.what): missing required key 'targets' (a list of \"host:port\", \"smtp://host:587\" or \"imap://host:143\")"))
        }
        let warn = collect { try o.duration("warn_before") } ?? defaultWarnBefore
        let critical = collect { try o.duration("critical_before") } ?? defaultCriticalBefore
        if critical > warn {
            errors.append(
                o.error(
                    o.has("critical_before") ? "critical_before" : "warn_before",
                    "\(o.what): 'critical_before' (\(DurationParser.format(critical))) must not be longer than 'warn_before' (\(DurationParser.format(warn)))"))
        }
        let caFile = collect { try o.path("ca_file") }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            errors.append(o.error("ca_file", "\(o.what): cannot read ca_file \(caFile)"))
        }
        if !errors.isEmpty { throw ConfigErrors(errors) }
        return CertificateProvider(targets: targets, warnBefore: warn, criticalBefore: critical, caFile: caFile)
    }

    /// The line of each string of a multi-line array written from line `start` of `file` (the
    /// config tree knows only the key's line): each is searched, quoted, from where the one
    /// before it was found. Nil where it is not found as written (escapes) or not a string.
    static func elementLines(file: String, from start: Int?, _ strings: [String?]) -> [Int?] {
        guard let start, strings.count > 1, let data = FileManager.default.contents(atPath: file), data.count < 1 << 20 else {
            return strings.map { _ in nil }
        }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var (row, column) = (start - 1, 0)  // where the previous string ended
        return strings.map { s in
            guard let s, !s.isEmpty else { return nil }
            var i = row
            while i < lines.count {
                let line = lines[i]
                let from = i == row ? line.index(line.startIndex, offsetBy: min(column, line.count)) : line.startIndex
                if let r = line[from...].firstRange(of: "\"\(s)\"") ?? line[from...].firstRange(of: "'\(s)'") {
                    (row, column) = (i, line.distance(from: line.startIndex, to: r.upperBound))
                    return i + 1
                }
                i += 1
            }
            return nil
        }
    }

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        guard let probe = ctx.certificates else {
            throw PollError(.transient, "this build's network client cannot read TLS certificates")
        }
        let outcomes = await withTaskGroup(of: (Int, Result<Item, CertificateFailure>).self) { group in
            for (i, target) in targets.enumerated() {
                group.addTask { (i, await check(target, probe: probe, timeout: ctx.timeout, now: ctx.now)) }
            }
            var all: [(Int, Result<Item, CertificateFailure>)] = []
            for await outcome in group { all.append(outcome) }
            return all.sorted { $0.0 < $1.0 }.map(\.1)
        }
        var items: [Item] = []
        var failures: [String] = []
        for (target, outcome) in zip(targets, outcomes) {
            switch outcome {
            case .success(let item): items.append(item)
            case .failure(let f): failures.append("\(target.key): \(f.message)")
            }
        }
        // A target that cannot be reached fails the whole poll: a snapshot without its item
        // would report it removed, and its certificate did not go away.
        guard failures.isEmpty else {
            let head = failures.count == 1 ? "" : "\(failures.count) of \(targets.count) targets failed: "
            throw PollError(.transient, head + failures.joined(separator: "; "))
        }
        return .snapshot(items)
    }

    struct CertificateFailure: Error {
        var message: String
    }

    /// Verification on; if the certificate does not verify, again without, to read its dates.
    func check(
        _ target: CertificateTarget, probe: any CertificateProbe, timeout: TimeInterval,
        now: Date
    ) async -> Result<Item, CertificateFailure> {
        let deadline = ContinuousClock.now + .milliseconds(Int64(min(max(timeout, 0.001), 1e9) * 1000))
        func left() -> TimeInterval {
            let d = ContinuousClock.now.duration(to: deadline)
            return max(0.001, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
        }
        var failure: String?
        let peer: PeerCertificates
        do {
            do {
                peer = try await probe.certificates(CertificateRequest(endpoint: target.endpoint, verify: true, caFile: caFile, timeout: left()))
            } catch CertificateProbeError.verification(let reason) {
                failure = reason
                peer = try await probe.certificates(CertificateRequest(endpoint: target.endpoint, verify: false, caFile: caFile, timeout: left()))
            }
        } catch let e as CertificateProbeError {
            return .failure(CertificateFailure(message: e.description))
        } catch {
            return .failure(CertificateFailure(message: "\(error)"))
        }
        do {
            let leaf = try LeafCertificate(peer)
            return .success(item(target, leaf: leaf, chainLength: peer.count, verifyError: failure, now: now))
        } catch let e as LeafCertificate.ParseError {
            return .failure(CertificateFailure(message: e.message))
        } catch {
            return .failure(CertificateFailure(message: "\(error)"))
        }
    }

    /// The severity band of a certificate with `daysLeft` whole days left.
    func band(daysLeft: Int) -> Severity {
        if Double(daysLeft) < criticalBefore / 86400 { return .critical }
        if Double(daysLeft) < warnBefore / 86400 { return .warning }
        return .info
    }

    /// The item for `target` (pure: `now` is injected).
    func item(_ target: CertificateTarget, leaf: LeafCertificate, chainLength: Int, verifyError: String?, now: Date) -> Item {
        let daysLeft = Int((leaf.notAfter.timeIntervalSince(now) / 86400).rounded(.down))
        let band = band(daysLeft: daysLeft)
        let reason = verifyError.map(Self.reason(of:))
        let severity: Severity = reason == nil ? band : .critical
        let expiry = Timestamp.format(leaf.notAfter)
        let when: String
        switch daysLeft {
        case ..<0:
            let ago = Int((now.timeIntervalSince(leaf.notAfter) / 86400).rounded(.down))
            when = ago == 0 ? "expired less than a day ago (\(expiry))" : "expired \(ago) day\(ago == 1 ? "" : "s") ago (\(expiry))"
        case ..<1: when = "expires within a day (\(expiry))"
        default: when = "expires in \(daysLeft) day\(daysLeft == 1 ? "" : "s") (\(expiry))"
        }
        let title = reason.map { "\(target.key): certificate does not verify (\($0)), \(when)" } ?? "\(target.key): certificate \(when)"
        var lines = ["Subject: \(leaf.subject)", "Issuer: \(leaf.issuer)", "Not after: \(expiry)", "SHA-256: \(leaf.sha256)"]
        if let verifyError { lines.insert("Verification failed: \(Self.clean(verifyError, limit: 300))", at: 0) }
        var data: [String: JSONValue] = [
            "target": .string(target.key),
            "not_after": .string(expiry),
            "days_left": .number(Double(daysLeft)),
            "subject": .string(leaf.subject),
            "issuer": .string(leaf.issuer),
            "serial": .string(leaf.serial),
            "sha256": .string(leaf.sha256),
            "verified": .bool(verifyError == nil),
            "chain_length": .number(Double(chainLength)),
        ]
        if let notBefore = leaf.notBefore { data["not_before"] = .string(Timestamp.format(notBefore)) }
        if let reason, let verifyError {
            data["reason"] = .string(reason)
            data["verify_error"] = .string(Self.clean(verifyError, limit: 300))
        }
        // What makes an event: a new certificate, a new band, a (different) verification failure.
        let fingerprint = Fingerprint.of(["certificate", leaf.sha256, band.rawValue, reason ?? ""])
        return Item(
            key: target.key, kind: "certificate", title: title, body: lines.joined(separator: "\n"), url: target.link,
            severity: severity, data: .object(data), fingerprint: fingerprint)
    }

    /// Why a certificate does not verify, in a word, from the TLS library's message.
    static func reason(of message: String) -> String {
        let m = message.lowercased()
        if m.contains("expired") { return "expired" }
        if m.contains("not yet valid") { return "not yet valid" }
        if m.contains("self-signed") || m.contains("self signed") { return "self-signed" }
        if m.contains("subject name") || m.contains("host name") || m.contains("hostname") || m.contains("does not match") {
            return "wrong name"
        }
        if m.contains("revoked") { return "revoked" }
        if m.contains("issuer") || m.contains("unknown ca") || m.contains("untrusted") || m.contains("chain") { return "untrusted" }
        return "does not verify"
    }

    /// Control characters (terminal escapes) dropped, whitespace runs collapsed, cut.
    static func clean(_ s: String, limit: Int = 500) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                if !out.hasSuffix(" ") { out.unicodeScalars.append(" ") }
                continue
            }
            out.unicodeScalars.append(scalar)
        }
        let line = out.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        return line.count > limit ? String(line.prefix(limit - 1)) + "…" : line
    }
}

/// One `targets` entry: where to connect and how.
package struct CertificateTarget: Sendable, Equatable {
    package enum Mode: String, Sendable {
        /// TLS from the first byte (HTTPS, SMTPS, IMAPS, any TLS port).
        case tls
        case smtpStartTLS = "smtp"
        case imapStartTLS = "imap"
    }

    package var mode: Mode
    /// Lower-case host name or address (IPv6 without brackets).
    package var host: String
    package var port: Int

    struct ParseError: Error {
        var message: String
    }

    /// `host:port` (`host` alone: 443; `[::1]:443`), `https://host[:port]`, `smtps://host[:465]`,
    /// `imaps://host[:993]`, `smtp://host[:25]` or `imap://host[:143]` (STARTTLS).
    init(parsing raw: String) throws {
        let text = raw.trimmed(newlines: false)
        let bad = { (why: String) in ParseError(message: "\"\(CertificateProvider.clean(raw, limit: 100))\" \(why)") }
        guard !text.isEmpty else { throw ParseError(message: "an empty target") }
        var rest = Substring(text)
        var defaultPort = 443
        mode = .tls
        if let range = text.firstRange(of: "://") {
            let scheme = text[..<range.lowerBound].lowercased()
            switch scheme {
            case "https": (mode, defaultPort) = (.tls, 443)
            case "smtps": (mode, defaultPort) = (.tls, 465)
            case "imaps": (mode, defaultPort) = (.tls, 993)
            case "smtp": (mode, defaultPort) = (.smtpStartTLS, 25)
            case "imap": (mode, defaultPort) = (.imapStartTLS, 143)
            default:
                throw bad("has an unknown scheme \"\(CertificateProvider.clean(scheme, limit: 20))\" (use host:port, smtp://host:587 or imap://host:143)")
            }
            rest = text[range.upperBound...]
            if rest.hasSuffix("/") { rest.removeLast() }
        }
        guard !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#") else {
            throw bad("is not a host and port (no path, user or query: host:port, smtp://host:587)")
        }
        var hostPart: Substring
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("has an unclosed '[' (an IPv6 address is written [::1]:443)") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("has text after the IPv6 address") }
                portPart = after.dropFirst()
            }
        } else {
            let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw bad("has more than one ':' (an IPv6 address is written [::1]:443)") }
            hostPart = parts[0]
            portPart = parts.count == 2 ? parts[1] : nil
        }
        let hostText = hostPart.lowercased()
        guard !hostText.isEmpty, hostText.utf8.allSatisfy({ isASCIIAlphanumeric($0) || ".-_:".utf8.contains($0) }) else {
            throw bad("has no valid host name")
        }
        host = hostText
        if let portPart {
            guard let p = Int(portPart), (1...65535).contains(p) else { throw bad("has an invalid port (1 to 65535)") }
            port = p
        } else {
            port = defaultPort
        }
    }

    package init(mode: Mode, host: String, port: Int) {
        self.mode = mode
        self.host = host
        self.port = port
    }

    private var hostInURL: String { host.contains(":") ? "[\(host)]" : host }

    /// The item key: `host:port`, or `smtp://host:port` / `imap://host:port`.
    package var key: String {
        mode == .tls ? "\(hostInURL):\(port)" : "\(mode.rawValue)://\(hostInURL):\(port)"
    }

    /// What the probe connects to: `https://` stands for any implicit-TLS port (no request is sent).
    package var endpoint: URL {
        URL(string: mode == .tls ? "https://\(hostInURL):\(port)/" : "\(mode.rawValue)://\(hostInURL):\(port)/")!
    }

    /// The HTTPS page, for an event's `url` (only port 443: other TLS ports are rarely web pages).
    var link: String? { mode == .tls && port == 443 ? "https://\(hostInURL)/" : nil }
}

/// The fields of a leaf certificate as libcurl's certinfo reports them.
struct LeafCertificate: Equatable {
    var notBefore: Date?
    var notAfter: Date
    var subject: String
    var issuer: String
    /// Lower-case hex, no separators.
    var serial: String
    /// SHA-256 of the DER certificate, lower-case hex.
    var sha256: String

    struct ParseError: Error {
        var message: String
    }

    init(_ peer: PeerCertificates) throws {
        guard !peer.chain.isEmpty else { throw ParseError(message: "the server sent no certificate") }
        guard let expire = peer.field("Expire date") else { throw ParseError(message: "the certificate has no expiry date") }
        guard let notAfter = Self.date(expire) else {
            throw ParseError(message: "cannot read the certificate's expiry date \"\(CertificateProvider.clean(expire, limit: 60))\"")
        }
        guard let pem = peer.field("Cert"), let der = Self.der(pem) else {
            throw ParseError(message: "the certificate itself (PEM) is missing or unreadable")
        }
        self.notAfter = notAfter
        notBefore = peer.field("Start date").flatMap(Self.date)
        subject = CertificateProvider.clean(peer.field("Subject") ?? "", limit: 500)
        issuer = CertificateProvider.clean(peer.field("Issuer") ?? "", limit: 500)
        serial = Self.hex(serial: peer.field("Serial Number") ?? "")
        sha256 = Fingerprint.sha256(der)
    }

    /// OpenSSL's `ASN1_TIME_print` form, `Nov  6 13:23:02 2026 GMT`, or `2026-11-06 13:23:02 GMT`.
    static func date(_ raw: String) -> Date? {
        let parts = raw.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var c = DateComponents()
        let hms: [Int]
        if parts.count >= 4, let month = months.firstIndex(of: parts[0].lowercased()), let day = Int(parts[1]), let year = Int(parts[3]) {
            (c.year, c.month, c.day) = (year, month + 1, day)
            hms = parts[2].split(separator: ":").compactMap { Int($0) }
        } else if parts.count >= 2 {
            let ymd = parts[0].split(separator: "-").compactMap { Int($0) }
            guard ymd.count == 3 else { return nil }
            (c.year, c.month, c.day) = (ymd[0], ymd[1], ymd[2])
            hms = parts[1].split(separator: ":").compactMap { Int($0) }
        } else {
            return nil
        }
        if let zone = parts.last, zone.allSatisfy(\.isLetter), !["gmt", "utc", "z"].contains(zone.lowercased()) { return nil }
        guard hms.count >= 2, (1...12).contains(c.month ?? 0), (1...31).contains(c.day ?? 0) else { return nil }
        (c.hour, c.minute, c.second) = (hms[0], hms[1], hms.count > 2 ? hms[2] : 0)
        return calendar.date(from: c)
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let calendar: Calendar = {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        return c
    }()

    /// The DER bytes of a PEM certificate (the first `CERTIFICATE` block).
    static func der(_ pem: String) -> Data? {
        guard let begin = pem.firstRange(of: "-----BEGIN CERTIFICATE-----"),
            let end = pem[begin.upperBound...].firstRange(of: "-----END CERTIFICATE-----")
        else { return nil }
        let body = pem[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)), !data.isEmpty else { return nil }
        return data
    }

    /// `0a:1b:2c` or `0A1B2C` → `0a1b2c` (a negative serial keeps its `-`).
    static func hex(serial raw: String) -> String {
        let t = raw.trimmed(newlines: false).lowercased()
        let sign = t.hasPrefix("-") ? "-" : ""
        return sign + t.filter { $0.isHexDigit }.prefix(128)
    }
}
