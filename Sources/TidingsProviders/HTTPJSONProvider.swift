import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "http-json"`: any JSON endpoint; items picked out with JSON pointers.
///
/// ```toml
/// provider = "http-json"
/// url = "https://example.com/api/items"
/// items = "/data"                 # pointer to the array ("" = the document is the array)
/// key = "/id"
/// title = "{/name} is {/status}"  # a pointer or a {pointer} template
/// headers = { Accept = "application/json", Authorization_env = "API_TOKEN" }
/// ```
/// Header values may be secrets (``OptionReader/headers(_:)``). A source with a secret header, or
/// user info in its `url`, sends credentials: it is never redirected to another origin, and a
/// 401/403 means they were rejected. One without follows redirects anywhere (not https → http).
package struct HTTPJSONProvider: Provider {
    package var url: URL
    /// `url` was given as a secret (`url_file` …).
    package var urlIsSecret = false
    package var headers: HeaderTable
    package var items: String
    package var key: FieldTemplate?
    package var title: FieldTemplate?
    package var body: FieldTemplate?
    package var link: FieldTemplate?
    package var severity: FieldTemplate?
    package var kind: String

    package init(
        url: URL, headers: HeaderTable = HeaderTable(), items: String = "", key: FieldTemplate? = nil, title: FieldTemplate? = nil,
        body: FieldTemplate? = nil, link: FieldTemplate? = nil, severity: FieldTemplate? = nil, kind: String = "item"
    ) {
        self.url = url
        self.headers = headers
        self.items = items
        self.key = key
        self.title = title
        self.body = body
        self.link = link
        self.severity = severity
        self.kind = kind
    }

    package var host: String? { url.host }

    package static let factory = ProviderFactory(name: "http-json", summary: "any JSON endpoint, items picked with JSON pointers") { o, _, _ in
        let (url, urlIsSecret) = try o.requestURLOption("url")
        func field(_ k: String) throws -> FieldTemplate? {
            guard let s = try o.string(k) else { return nil }
            guard let t = FieldTemplate.shared(s) else {
                throw o.error(k, "\(o.what): '\(k)' must be a JSON pointer (\"/name\") or a template with {pointer} parts (\"{/name} is {/status}\")")
            }
            return t
        }
        let items = try o.string("items") ?? ""
        guard JSONPointer.isValid(items) else {
            throw o.error("items", "\(o.what): 'items' must be a JSON pointer like \"/data\" (or \"\" for the whole document)")
        }
        var provider = HTTPJSONProvider(
            url: url, headers: try o.headers(), items: items, key: try field("key"), title: try field("title"),
            body: try field("body"), link: try field("link"), severity: try field("severity"),
            kind: try o.string("kind") ?? "item")
        provider.urlIsSecret = urlIsSecret
        return provider
    }

    /// Whether requests carry credentials: a secret header, or user info in the URL.
    var credentials: Credentials { headers.carriesCredentials || url.user != nil || urlIsSecret ? .sent : .notSent }

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        var hdrs: [(String, String)] = [("Accept", "application/json")] + headers.pairs
        hdrs += ctx.validators.requestHeaders
        let response = try await ctx.send("GET", url, headers: hdrs, credentials: credentials)
        if response.status == 304 { return .notModified }
        guard (200..<300).contains(response.status) else {
            throw PollError.http(response, credentials: credentials, detail: PollError.excerpt(response.body))
        }
        let elements = try elements(in: response.body)
        if let key, !elements.isEmpty, !elements.contains(where: { stableKey($0) != nil }) {
            Log.warnOnce(
                "http-json key \(ctx.source) \(key)",
                """
                'key' resolved in none of the \(elements.count) items: each item is keyed by a hash of its \
                content, so any change reads as removed + new; fix 'key' (a JSON pointer into one item, like "/id")
                """, logger: ctx.logger)
        }
        return .snapshot(elements.map(item), validators: Validators(from: response))
    }

    /// A successful response body → items (pure: what `poll` does after the request; fuzzed by `make fuzz`).
    package func decode(_ responseBody: Data) throws -> [Item] {
        try elements(in: responseBody).map(item)
    }

    /// The JSON values at the `items` pointer.
    func elements(in responseBody: Data) throws -> [JSONValue] {
        let doc: JSONValue
        do { doc = try JSONValue.parse(responseBody) } catch { throw PollError(.transient, "\(url.host ?? ""): \(error)") }
        guard let list = JSONPointer.resolve(items, in: doc) else {
            throw PollError(.transient, "no value at items pointer \"\(items)\" in the response")
        }
        switch list {
        case .array(let a): return a
        case .object(let o):
            return o.keys.sorted().map { k in
                if case .object(var inner) = o[k]! {
                    inner["_key"] = .string(k)
                    return .object(inner)
                }
                return ["_key": .string(k), "value": o[k]!]
            }
        default: throw PollError(.transient, "the value at items pointer \"\(items)\" is not an array")
        }
    }

    /// The item's key from `key`, else (items in an object) its name; nil: the content hash it
    /// falls back to, which changes with every change of the item.
    func stableKey(_ e: JSONValue) -> String? {
        key?.render(e) ?? e["_key"]?.stringValue
    }

    func item(_ e: JSONValue) -> Item {
        let k = stableKey(e) ?? Fingerprint.of([e.jsonString()])
        return Item(
            key: k, kind: kind, title: title?.render(e) ?? k, body: body?.render(e) ?? "", url: link?.render(e),
            severity: Severity(lenient: severity?.render(e)), data: e)
    }
}
