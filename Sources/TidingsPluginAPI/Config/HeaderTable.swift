import Foundation

/// Request headers a source or sink is configured with (``OptionReader/headers(_:)``), each
/// value plain or a secret.
public struct HeaderTable: Sendable {
    public enum Value: Sendable {
        case plain(String)
        /// From `X_file`, `X_env`, `X_credential`, or inline on a credential-like header.
        case secret(Secret)

        public var text: String {
            switch self {
            case .plain(let s): return s
            case .secret(let s): return s.value
            }
        }
    }

    public struct Field: Sendable {
        public let name: String
        public let value: Value
        public init(name: String, value: Value) {
            self.name = name
            self.value = value
        }
    }

    public var fields: [Field]

    public init(_ fields: [Field] = []) { self.fields = fields }

    /// Plain headers, as written (tests and built-in defaults).
    public init(plain pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: .plain($0.1)) }
    }

    /// What goes on the wire.
    public var pairs: [(String, String)] { fields.map { ($0.name, $0.value.text) } }

    /// Whether any value is a secret: requests carrying them never leave their origin, and a
    /// 401/403 to them means rejected credentials.
    public var carriesCredentials: Bool {
        fields.contains { if case .secret = $0.value { return true } else { return false } }
    }

    /// Header names whose inline values are secrets: `Authorization`, `Proxy-Authorization`,
    /// `Cookie`, and any name containing token, key, secret, auth, password, session or signature.
    public static func isCredentialLike(_ name: String) -> Bool {
        let n = name.lowercased()
        return n == "cookie" || ["token", "key", "secret", "auth", "password", "session", "signature"].contains { n.contains($0) }
    }

    /// An RFC 9110 token: what libcurl may put before the colon without changing the request.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// No line break or NUL: a value cannot add headers of its own.
    public static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 0x0A || $0 == 0x0D || $0 == 0 }
    }
}
