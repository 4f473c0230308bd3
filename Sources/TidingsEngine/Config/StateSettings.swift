import FoundationEssentials
import TidingsPluginAPI

/// `[state]` in the main file (DESIGN §11): where the state lives. Absent, or without `url`:
/// the SQLite file in the state directory. With `url = "postgres://USER@HOST:PORT/DB"`: a
/// PostgreSQL database that several daemons may share.
///
/// ```toml
/// [state]
/// url = "postgres://tidings@db.example.net:5432/tidings?sslmode=verify-full"
/// password_file = "/etc/tidings/pg-password"   # or password, password_env, password_credential
/// sslmode = "verify-full"      # disable | require | verify-ca | verify-full (also ?sslmode= in the URL)
/// ca_file = "/etc/ssl/certs/db-ca.pem"          # trust anchors for verify-ca / verify-full
/// pool_size = 4               # connections per process
/// connect_timeout = "10s"
/// ```
package struct StateSettings: Sendable {
    /// How the connection to PostgreSQL is protected (libpq's `sslmode`, without `prefer` and
    /// `allow`, which fall back to plain text without saying so).
    package enum TLSMode: String, Sendable, CaseIterable {
        /// No TLS. Only sensible on loopback or a trusted private network.
        case disable
        /// TLS, certificate not checked (encryption against a passive listener only).
        case require
        /// TLS; the certificate must chain to a trusted CA (`ca_file`, else the system's).
        case verifyCA = "verify-ca"
        /// As verify-ca, and the certificate must name the host connected to. The default for
        /// every host but loopback and a Unix socket.
        case verifyFull = "verify-full"
    }

    /// The PostgreSQL URL, without its password; nil: SQLite.
    package var url: URL?
    package var password: Secret?
    package var tls: TLSMode
    package var caFile: String?
    package var poolSize: Int
    package var connectTimeout: TimeInterval
    /// The config file and line of `url`, for messages.
    package var origin: String

    package init(
        url: URL? = nil, password: Secret? = nil, tls: TLSMode = .verifyFull, caFile: String? = nil, poolSize: Int = 4,
        connectTimeout: TimeInterval = 10, origin: String = ""
    ) {
        self.url = url
        self.password = password
        self.tls = tls
        self.caFile = caFile
        self.poolSize = poolSize
        self.connectTimeout = connectTimeout
        self.origin = origin
    }

    /// The SQLite default.
    package static let sqlite = StateSettings()

    package var isPostgres: Bool { url != nil }

    /// Host (or Unix socket directory), port, user and database from the URL.
    package var host: String { url?.host.flatMap { $0.isEmpty ? nil : $0 } ?? queryItem("host") ?? "/var/run/postgresql" }
    package var port: Int { url?.port ?? queryItem("port").flatMap(Int.init) ?? 5432 }
    package var user: String { url?.user.flatMap { $0.percentDecoded } ?? ProcessInfo.processInfo.environment["USER"] ?? "tidings" }
    package var database: String {
        let path = url?.path ?? ""
        let name = path.hasPrefix("/") ? String(path.dropFirst()) : path
        return name.isEmpty ? user : (name.percentDecoded ?? name)
    }

    /// The URL as shown in messages: never with a password.
    package var location: String {
        guard let url, var c = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "SQLite" }
        c.password = nil
        return c.string ?? url.absoluteString
    }

    /// Whether the URL names this machine as the server (a Unix socket, 127.0.0.0/8, ::1,
    /// localhost). A URL that names no host is not: libpq then takes it from a service file
    /// (`?service=`) or `PGHOST`, which may name another machine (over a Unix socket, libpq
    /// uses no TLS whatever sslmode says).
    package var isLoopback: Bool {
        guard url?.host.map({ !$0.isEmpty }) == true || queryItem("host") != nil else { return false }
        let h = host
        return h.hasPrefix("/") || h == "localhost" || h.hasPrefix("127.") || h == "::1" || h == "[::1]"
    }

    func queryItem(_ name: String) -> String? {
        url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == name }?.value }
    }

    /// Reads `[state]`.
    package init(_ r: OptionReader) throws {
        self.init()
        guard let given = try r.configURL("url") else {
            for key in ["password", "sslmode", "ca_file", "pool_size", "connect_timeout"] where r.table[key] != nil {
                throw r.error(key, "\(r.what): '\(key)' needs 'url' (a postgres:// URL); without it the state is the SQLite file in state_dir")
            }
            for key in ["password_file", "password_env", "password_credential"] where r.table[key] != nil {
                throw r.error(key, "\(r.what): '\(key)' needs 'url' (a postgres:// URL)")
            }
            return
        }
        let line = r.table["url"]?.line.map { ":\($0)" } ?? ""
        origin = "\(r.file)\(line)"
        guard let parsed = URLComponents(string: given.raw), ["postgres", "postgresql"].contains(parsed.scheme?.lowercased() ?? "") else {
            throw r.error("url", "\(r.what): 'url' must be a postgres:// URL (postgres://USER@HOST:PORT/DATABASE), not \"\(given.shown)\"")
        }
        var c = parsed
        let inline = c.password.flatMap { $0.percentDecoded ?? $0 }
        c.password = nil
        url = c.url
        // Every other parameter is libpq's (options, application_name, service, keepalives…):
        // the URL goes to libpq as it is, and libpq judges it when the state is opened.
        // Every key is read even when one is wrong, so that all mistakes are reported at once
        // and none of the documented keys is then called unknown (a refused sslmode used to
        // leave connect_timeout unread: "unknown key 'connect_timeout'").
        var errors: [ConfigError] = []
        func collect(_ body: () throws -> Void) {
            do { try body() } catch let e as ConfigError { errors.append(e) } catch let e as ConfigErrors {
                errors += e.errors
            } catch { errors.append(r.error(nil, "\(r.what): \(error)")) }
        }
        collect {
            let given = try r.secret("password", required: false)
            if let inline, !inline.isEmpty {
                if inline.count < SecretForms.minimumLength { throw r.tooShortError("url", what: "the password in 'url'") }
                if given != nil { throw r.error("url", "\(r.what): the password is given twice: in 'url' and as 'password'") }
                // A password in the URL is an inline secret: refused in a file others can read.
                if let mode = FilePermissions.mode(of: r.file), mode & 0o044 != 0 {
                    throw r.error(
                        "url",
                        "\(r.what): 'url' carries a password, an inline secret, in a file readable by group or others (mode \(String(mode & 0o777, radix: 8))); chmod 600 \(r.file), or use 'password_file'"
                    )
                }
                password = Secret(inline)
            } else {
                password = given
            }
        }
        tls = isLoopback ? .disable : .verifyFull
        collect {
            guard let modeText = try r.string("sslmode") ?? queryItem("sslmode") else { return }
            guard let mode = TLSMode(rawValue: modeText) else {
                let fallback =
                    ["prefer", "allow"].contains(modeText)
                    ? "\"\(modeText)\" is not offered: it falls back to plain text without saying so; use require, verify-ca or verify-full (or disable, on a network you trust)"
                    : "not \"\(modeText)\""
                throw r.error(
                    r.table["sslmode"] != nil ? "sslmode" : "url",
                    "\(r.what): sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")): \(fallback)")
            }
            tls = mode
        }
        collect { caFile = try r.path("ca_file") ?? queryItem("sslrootcert") }
        collect { if let n = try r.int("pool_size", range: 1...64) { poolSize = n } }
        collect {
            if let t = try r.duration("connect_timeout", minimum: 1) {
                connectTimeout = t
            } else if let text = queryItem("connect_timeout") {
                guard let t = Double(text), t.isFinite else {
                    throw r.error("url", "\(r.what): connect_timeout in 'url' must be a number of seconds, not \"\(text)\"")
                }
                connectTimeout = max(1, t)
            }
        }
        if !errors.isEmpty { throw ConfigErrors(errors) }
    }
}
