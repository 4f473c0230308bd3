import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// What the chat channels (`telegram`, `slack`, `discord`) have in common: the severity mark,
/// which event URLs become links, and how their secret-bearing URLs are read.
package enum ChatChannel {
    /// Whole-request deadline of one message.
    package static let timeout: TimeInterval = 15
    /// Largest answer read (a message envelope or an error).
    package static let maxBody = 1 << 20

    /// The mark a message starts with, so the severity is seen before it is read.
    package static func emoji(_ severity: Severity) -> String {
        switch severity {
        case .info: return "ℹ️"
        case .warning: return "⚠️"
        case .critical: return "🚨"
        }
    }

    /// The event's URL when a chat client may show it as a link: `http` or `https` with a host
    /// (a `javascript:` URL or a malformed one from a remote system is not linked).
    package static func link(_ event: Event) -> URL? {
        guard let raw = event.url, let url = URL(string: raw), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty
        else { return nil }
        return url
    }

    /// A webhook URL given as secret option `key` (`url`, `url_file`, …): the whole URL is the
    /// credential, so no message shows it, and its last path segment (the token part) is
    /// registered with the ``Redactor`` too, in case a server echoes only that.
    package static func webhookURL(_ o: OptionReader, _ key: String = "url") throws -> URL {
        let secret = try o.secret(key, required: true)!
        if secret.value.isEmpty { return URL(string: "https://placeholder.invalid/")! }  // a lenient load
        let url = try httpURL(o, key, secret.value, shown: false)
        let token = url.lastPathComponent
        if token.count >= 16 { Redactor.shared.register(token) }
        return url
    }

    /// `raw` as an `https` URL, or plain `http` to loopback only (every chat request carries a
    /// secret). `shown: false` keeps the value out of the error message.
    package static func httpURL(_ o: OptionReader, _ key: String, _ raw: String, shown: Bool) throws -> URL {
        let value = shown ? " \"\(raw)\"" : " (value not shown: it is a secret)"
        guard let url = URL(string: raw), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty
        else { throw o.error(key, "\(o.what): '\(key)' must be an https:// URL\(shown ? ", not" : "")\(value)") }
        if scheme == "http" && !Loopback.contains(host: host) {
            throw o.error(
                key,
                "\(o.what): '\(key)' must use https:// (plain http is only allowed to loopback: the request carries a secret)\(shown ? "; got\(value)" : "")")
        }
        return url
    }

    /// How messages name a webhook endpoint: the service and host, never the path (the secret).
    package static func endpoint(_ name: String, _ url: URL) -> String {
        "\(name) at \(url.host ?? "?")"
    }

    /// The JSON encoder every chat payload is written with: snake_case keys, sorted (stable
    /// bodies for tests), `/` unescaped.
    package static func encode<T: Encodable>(_ value: T) -> Data {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every payload is made of strings, numbers and booleans: encoding cannot fail.
        return (try? e.encode(value)) ?? Data("{}".utf8)
    }

    /// A JSON answer (error bodies), nil when it is not the expected shape.
    package static func decode<T: Decodable>(_ type: T.Type, _ body: Data) -> T? {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        return try? d.decode(type, from: body)
    }

    /// A POST of a JSON payload, never redirected.
    package static func post(_ url: URL, json: Data) -> HTTPRequest {
        HTTPRequest(
            method: "POST", url: url, headers: [("Content-Type", "application/json")], body: json,
            timeout: timeout, maxBody: maxBody, redirects: .never)
    }

    /// The message of a failed answer, as ``HTTPDelivery`` words it, plus what it means.
    package static func failure(_ endpoint: String, _ r: HTTPResponse, _ category: DeliveryError.Category, _ meaning: String, retryAfter: TimeInterval? = nil)
        -> HTTPDelivery.Outcome
    {
        .failed(DeliveryError(category, "\(endpoint): HTTP \(r.status)\(HTTPDelivery.excerpt(r.body)) (\(meaning))", retryAfter: retryAfter))
    }
}
