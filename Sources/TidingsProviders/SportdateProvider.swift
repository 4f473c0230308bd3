import FoundationEssentials
import Logging
import Synchronization
import TidingsPOSIX
import TidingsPluginAPI

/// Sportdate's member API (README.md, section "sportdate"): verifies the credentials with
/// `POST /api/member/get` before the first poll, then polls `/api/message/check`
/// (GET with the JSON credentials as its body, per the spec; `message_method = "POST"` for
/// servers or proxies that drop a GET's body).
///
/// - `type: notify` → kind `message` (a personal notice);
/// - `type: messagebox` → kind `notice` (a broadcast, pending until dismissed or expired);
/// - any other type → kind = that type (logged once per type).
///
/// The API has no ids: an item's key is a hash of type, text and URL, so an entry that
/// disappears and later returns is new again. Credentials travel on every request, so
/// plain `http://` is refused unless the host is loopback or `allow_insecure_http = true`, and
/// no request follows a redirect off `base_url`'s scheme, host and port (a redirect from
/// loopback cannot carry the password elsewhere).
package final class SportdateProvider: Provider, Sendable {
    /// `provider = "sportdate"`.
    package static let factory = ProviderFactory(
        name: "sportdate", summary: "Sportdate member messages and broadcast notices"
    ) { options, _, _ in
        let base = try ProviderSupport.baseURL(options, default: "https://www.sportdate.se")
        let email = try options.requiredString("email")
        guard let password = try options.secret("password", required: true) else { throw options.error(nil, "\(options.what): missing password") }
        // The spec sends the credentials as a JSON body on a GET; the libcurl client can.
        let method = (try options.string("message_method") ?? "GET").uppercased()
        guard method == "GET" || method == "POST" else {
            throw options.error("message_method", "\(options.what): 'message_method' must be \"GET\" (the spec) or \"POST\", not \"\(method)\"")
        }
        let insecureOK = try options.bool("allow_insecure_http") ?? false
        if base.scheme?.lowercased() == "http" && !insecureOK && !Loopback.contains(base) {
            throw options.error(
                "base_url",
                "\(options.what): refusing to send the Sportdate password over plain http (\(base.absoluteString)); use https://, or set allow_insecure_http = true if you accept the risk"
            )
        }
        return SportdateProvider(base: base, email: email, password: password, messageMethod: method)
    }

    let base: URL
    let email: String
    let password: Secret
    let messageMethod: String
    private let loggedTypes = Mutex<Set<String>>([])

    init(base: URL, email: String, password: Secret, messageMethod: String) {
        self.base = base
        self.email = email
        self.password = password
        self.messageMethod = messageMethod
    }

    package var host: String? { base.host }

    /// The JSON body the spec puts on both calls: `{"epost": …, "losen": …}`.
    var credentialsBody: Data {
        let obj: JSONValue = ["epost": .string(email), "losen": .string(password.value)]
        return Data(obj.jsonString().utf8)
    }

    private var jsonHeaders: [(String, String)] { [("Content-Type", "application/json"), ("Accept", "application/json")] }

    /// Checks the credentials once after start or reload (`success: false` → auth-failed).
    package func prepare(_ context: PollContext) async throws {
        let response = try await context.send(
            "POST", ProviderSupport.join(base, "/api/member/get"), headers: jsonHeaders, body: credentialsBody, credentials: .sent)
        if [404, 405].contains(response.status) {
            // The deployed API differs from the spec in places: without a login check, the
            // message check's `success` still tells rejected credentials apart.
            context.logger.warning("\(context.source): no login check at /api/member/get (HTTP \(response.status)); relying on the message check")
            return
        }
        guard ProviderSupport.isSuccess(response) else { throw PollError.http(response, credentials: .sent, detail: "login check failed") }
        let json = try ProviderSupport.json(response, what: "Sportdate login check")
        guard Self.success(json) else {
            throw PollError(.auth, "Sportdate rejected the credentials for \(email) (success: false); fix the password and reload")
        }
    }

    package func poll(_ context: PollContext) async throws -> PollResult {
        let response = try await context.send(
            messageMethod, ProviderSupport.join(base, "/api/message/check"), headers: jsonHeaders, body: credentialsBody, credentials: .sent)
        guard ProviderSupport.isSuccess(response) else { throw PollError.http(response, credentials: .sent) }
        let messages = try Self.decode(response.body, email: email)
        for m in messages where !["notify", "messagebox"].contains(m.type) {
            let first = loggedTypes.withLock { $0.insert(m.type).inserted }
            if first { context.logger.notice("\(context.source): unknown Sportdate message type '\(m.type)', kept as kind '\(m.type)'") }
        }
        return .snapshot(messages.map { $0.item(base: base) })
    }

    /// A message-check body → items (pure: what `poll` does after the request; fuzzed by `make fuzz`).
    package static func decode(_ body: Data, base: URL, email: String) throws -> [Item] {
        try decode(body, email: email).map { $0.item(base: base) }
    }

    static func decode(_ body: Data, email: String) throws -> [Message] {
        let json = try ProviderSupport.json(body, what: "Sportdate message check")
        guard Self.success(json) else {
            throw PollError(
                .auth, "Sportdate answered success: false to the message check for \(email) (credentials rejected?); not retrying until the config changes")
        }
        return try Self.decodeMessages(json)
    }

    // MARK: decoding

    /// One entry of `messages`.
    struct Message: Equatable {
        var type: String
        var text: String
        var actionURL: String?

        var kind: String {
            switch type {
            case "notify": return "message"
            case "messagebox": return "notice"
            default: return type.isEmpty ? "message" : type
            }
        }

        /// Key: a hash of type, text and URL (the API has no ids).
        var key: String { "\(type.isEmpty ? "message" : type):\(Fingerprint.of([type, text, actionURL ?? ""]))" }

        func item(base: URL) -> Item {
            let url = actionURL.flatMap { raw -> String? in
                guard !raw.isEmpty else { return nil }
                if raw.contains("://") { return raw }
                return URL(string: raw, relativeTo: base)?.absoluteString ?? raw
            }
            return Item(
                key: key, kind: kind, title: text.isEmpty ? "(empty \(type) message)" : text, url: url,
                data: ["type": .string(type)])
        }
    }

    /// `success` is true only when the server says so (missing counts as success only if messages are present).
    static func success(_ json: JSONValue) -> Bool {
        guard let s = Self.field(json, "success") else { return Self.field(json, "messages") != nil }
        switch s {
        case .bool(let b): return b
        case .string(let t): return ["true", "1", "yes"].contains(t.lowercased())
        case .number(let n): return n != 0
        default: return false
        }
    }

    /// Decodes `messages` leniently: missing or null means none; keys match case-insensitively.
    static func decodeMessages(_ json: JSONValue) throws -> [Message] {
        guard case .object = json else { throw PollError(.transient, "Sportdate message check: expected a JSON object") }
        guard let raw = field(json, "messages"), !raw.isNull else { return [] }
        guard let list = raw.arrayValue else { throw PollError(.transient, "Sportdate message check: 'messages' is not a list") }
        return list.compactMap { entry in
            guard case .object = entry else { return nil }
            let type = field(entry, "type")?.stringValue?.trimmed(newlines: false).lowercased() ?? ""
            let text = (field(entry, "messagetext") ?? field(entry, "message") ?? field(entry, "text"))?.stringValue ?? ""
            let url = (field(entry, "actionURL") ?? field(entry, "url"))?.stringValue?.trimmed(newlines: false)
            return Message(type: type, text: text, actionURL: url)
        }
    }

    static func field(_ json: JSONValue, _ name: String) -> JSONValue? {
        guard let o = json.objectValue else { return nil }
        if let v = o[name] { return v }
        return o.first { $0.key.lowercased() == name.lowercased() }?.value
    }
}
