import FoundationEssentials
import TidingsCrypto
import TidingsPluginAPI

/// Standard Webhooks signing (https://www.standardwebhooks.com): the `webhook-signature`
/// header is `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
package struct WebhookSignature: Sendable {
    /// The configured secret cannot be used.
    package enum Error: Swift.Error, CustomStringConvertible {
        case invalidSecret
        package var description: String {
            "the webhook secret must be 'whsec_' followed by base64 (as Standard Webhooks receivers expect)"
        }
    }

    private let key: Data

    /// A secret written `whsec_` + base64 of random bytes; the key is the decoded bytes.
    /// The `whsec_` prefix is optional on input, the base64 is not.
    package init(secret: String) throws {
        var encoded = secret.trimmed()
        if encoded.hasPrefix("whsec_") { encoded.removeFirst("whsec_".count) }
        guard let bytes = Data(base64Encoded: encoded), !bytes.isEmpty else { throw Error.invalidSecret }
        key = bytes
    }

    /// The `webhook-signature` header value for one message.
    package func sign(id: String, timestamp: Int, body: Data) -> String {
        var message = Data("\(id).\(timestamp).".utf8)
        message.append(body)
        let mac = HMACSHA256.authenticationCode(for: message, key: key)
        return "v1," + Data(mac).base64EncodedString()
    }
}
