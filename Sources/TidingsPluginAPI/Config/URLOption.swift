/// A URL-valued option as read from config, its user info split off before anything else looks
/// at it: the password is known to the ``Redactor`` before the value is validated, and
/// ``shown`` (what every message quotes) never holds it, however wrong the rest is
/// (`htps://u:PASS@host/x` shows as `htps://u:‹redacted›@host/x`).
///
/// A URL given as a secret (`url_file`, `url_env`, `url_credential`: a token in its query) is a
/// secret as a whole, and so is each query value of 4 characters or more; it shows as
/// `scheme://host[:port]/path`, without user info, query or fragment.
package struct ConfigURL: Sendable {
    /// The value as written: for parsing, never for a message.
    package let raw: String
    /// The value for messages: the password masked.
    package let shown: String
    /// The user name and the password (percent-decoded) when the value carries them.
    package let user: String?
    package let password: String?
    /// Given as a secret.
    package let isSecret: Bool

    /// Splits `raw` as text, not as a URL (a mistyped value may not parse): the user info is what
    /// comes before the last `@` of the authority (after `//`, up to the first `/`, `?` or `#`),
    /// the password what follows the first `:` in it.
    package init(_ raw: String, secret: Bool = false) {
        self.raw = raw
        isSecret = secret
        let start = raw.firstRange(of: "//")?.upperBound ?? raw.startIndex
        let end = raw[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? raw.endIndex
        let at = raw[start..<end].lastIndex(of: "@")
        let info = at.map { raw[start..<$0] }
        let colon = info?.firstIndex(of: ":")
        let pass = colon.map { info![info!.index(after: $0)...] }
        user = info.map { Self.percentDecoded($0[..<(colon ?? $0.endIndex)]) }
        password = pass.flatMap { $0.isEmpty ? nil : Self.percentDecoded($0) }
        // The password as written too (`%21` or `!`, in any mix), should a message quote it so.
        if let pass, !pass.isEmpty { _ = Secret(String(pass)) }
        if let password { _ = Secret(password) }
        if secret {
            let query = raw[end...].drop { $0 != "?" }.dropFirst().prefix { $0 != "#" }
            for pair in query.split(whereSeparator: { $0 == "&" || $0 == ";" }) {
                let value = pair.drop { $0 != "=" }.dropFirst()
                guard value.count >= SecretForms.minimumLength else { continue }
                _ = Secret(String(value))
                _ = Secret(Self.percentDecoded(Substring(value.replacing("+", with: " "))))
            }
            // scheme://host[:port]/path: no user info, query or fragment (nothing of a value
            // that is not even scheme://…).
            let host = at.map { raw.index(after: $0) } ?? start
            shown =
                start == raw.startIndex
                ? Redactor.mask : String(raw[..<start]) + String(raw[host..<end]) + String(raw[end...].prefix { $0 != "?" && $0 != "#" })
        } else if let colon, let at, password != nil {
            shown = String(raw[..<colon]) + ":" + Redactor.mask + String(raw[at...])
        } else {
            shown = raw
        }
    }

    /// `%XX` sequences decoded (others kept as written); not valid UTF-8 → as written.
    package static func percentDecoded(_ s: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(s.utf8)[...]
        let hex = NeedleTable.hexValue
        while let b = utf8.popFirst() {
            if b == UInt8(ascii: "%"), utf8.count >= 2, let h = hex(utf8[utf8.startIndex]), let l = hex(utf8[utf8.startIndex + 1]) {
                bytes.append(h << 4 | l)
                utf8.removeFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self) ?? String(s)
    }
}

extension OptionReader {
    /// A URL-valued option (any scheme), or nil when unset: the one reader of such options, so
    /// that a password in one is registered with the ``Redactor`` as soon as it is read, and
    /// errors about the value quote ``ConfigURL/shown``.
    package func configURL(_ key: String) throws -> ConfigURL? {
        try string(key).map { notingPassword(ConfigURL($0)) }
    }

    package func requiredConfigURL(_ key: String) throws -> ConfigURL {
        notingPassword(ConfigURL(try requiredString(key)))
    }

    /// A URL written inline: a password in it makes its table one that holds a secret.
    private func notingPassword(_ url: ConfigURL) -> ConfigURL {
        if url.password != nil { markInlineSecret() }
        return url
    }

    /// A URL option that may also be given as a secret: `X` (inline, a plain option), or
    /// `X_file`, `X_env`, `X_credential` (as any secret option; then ``ConfigURL/isSecret``).
    /// Nil when none is set.
    package func secretCapableURL(_ key: String) throws -> ConfigURL? {
        guard SecretSource.allCases.contains(where: { $0 != .inline && has($0.key(key)) }) else { return try configURL(key) }
        guard let secret = try secret(key, required: false) else { return nil }
        // A lenient load's placeholder for a secret that cannot be read.
        if secret.value.isEmpty { return ConfigURL("https://placeholder.invalid/", secret: true) }
        return ConfigURL(secret.value, secret: true)
    }
}
