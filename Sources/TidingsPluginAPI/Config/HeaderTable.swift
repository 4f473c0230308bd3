import FoundationEssentials

/// Request headers a source or sink is configured with (``OptionReader/headers(_:)``), each
/// value plain or a secret.
package struct HeaderTable: Sendable {
    package enum Value: Sendable {
        case plain(String)
        /// From `X_file`, `X_env`, `X_credential`, or inline on a credential-like header.
        case secret(Secret)

        package var text: String {
            switch self {
            case .plain(let s): return s
            case .secret(let s): return s.value
            }
        }
    }

    package struct Field: Sendable {
        package let name: String
        package let value: Value
        package init(name: String, value: Value) {
            self.name = name
            self.value = value
        }
    }

    package var fields: [Field]

    package init(_ fields: [Field] = []) { self.fields = fields }

    /// Plain headers, as written (tests and built-in defaults).
    package init(plain pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: .plain($0.1)) }
    }

    /// What goes on the wire.
    package var pairs: [(String, String)] { fields.map { ($0.name, $0.value.text) } }

    /// Whether any value is a secret: requests carrying them never leave their origin, and a
    /// 401/403 to them means rejected credentials.
    package var carriesCredentials: Bool {
        fields.contains { if case .secret = $0.value { return true } else { return false } }
    }

    /// Header names whose inline values are secrets: `Authorization`, `Proxy-Authorization`,
    /// `Cookie`, and any name containing token, key, secret, auth, password, session or signature.
    package static func isCredentialLike(_ name: String) -> Bool {
        let n = name.lowercased()
        return n == "cookie" || ["token", "key", "secret", "auth", "password", "session", "signature"].contains { n.contains($0) }
    }

    /// An RFC 9110 token: what libcurl may put before the colon without changing the request.
    package static func isValidName(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
            }
    }

    /// No line break or NUL: a value cannot add headers of its own.
    package static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
    }
}
