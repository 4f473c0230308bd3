/// A URL-valued option as read from config, its user info split off before anything else looks
/// at it: the password is known to the ``Redactor`` before the value is validated, and
/// ``shown`` (what every message quotes) never holds it, however wrong the rest is
/// (`htps://u:PASS@host/x` shows as `htps://u:‹redacted›@host/x`).
package struct ConfigURL: Sendable {
    /// The value as written: for parsing, never for a message.
    package let raw: String
    /// The value for messages: the password masked.
    package let shown: String
    /// The user name and the password (percent-decoded) when the value carries them.
    package let user: String?
    package let password: String?

    /// Splits `raw` as text, not as a URL (a mistyped value may not parse): the user info is what
    /// comes before the last `@` of the authority (after `//`, up to the first `/`, `?` or `#`),
    /// the password what follows the first `:` in it.
    package init(_ raw: String) {
        self.raw = raw
        let start = raw.firstRange(of: "//")?.upperBound ?? raw.startIndex
        let end = raw[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? raw.endIndex
        guard let at = raw[start..<end].lastIndex(of: "@") else {
            (shown, user, password) = (raw, nil, nil)
            return
        }
        let info = raw[start..<at]
        guard let colon = info.firstIndex(of: ":") else {
            (shown, user, password) = (raw, Self.percentDecoded(info), nil)
            return
        }
        user = Self.percentDecoded(info[..<colon])
        let pass = info[info.index(after: colon)...]
        password = pass.isEmpty ? nil : Self.percentDecoded(pass)
        shown = String(raw[..<colon]) + ":" + Redactor.mask + String(raw[at...])
        // The password as written too (`%21` or `!`, in any mix), should a message quote it so.
        if !pass.isEmpty { _ = Secret(String(pass)) }
        if let password { _ = Secret(password) }
    }

    /// `%XX` sequences decoded (others kept as written); not valid UTF-8 → as written.
    static func percentDecoded(_ s: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(s.utf8)[...]
        func hex(_ b: UInt8) -> UInt8? {
            switch b {
            case 0x30...0x39: return b - 0x30
            case 0x41...0x46: return b - 0x41 + 10
            case 0x61...0x66: return b - 0x61 + 10
            default: return nil
            }
        }
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
        try string(key).map(ConfigURL.init)
    }

    package func requiredConfigURL(_ key: String) throws -> ConfigURL {
        ConfigURL(try requiredString(key))
    }
}
