import CLibXML2
import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "feed"`: the entries of an RSS 0.9x/1.0/2.0, Atom 0.3/1.0 or JSON Feed 1.0/1.1
/// document, one item of kind `entry` each (DESIGN §12).
///
/// ```toml
/// provider = "feed"
/// url = "https://example.com/feed.xml"
/// include = ["(?i)release"]          # regular expressions on the title (SafeRegex)
/// exclude = ["(?i)nightly"]
/// max_entries = 500                  # only the first N entries of the document are read
/// ca_file = "/etc/ssl/private-ca.pem" # trust this CA for https instead of the system's
/// ```
/// XML is parsed by libxml2 in recovery mode, without external entities or DTD loads; a
/// document it had to repair is a warning, not a failure. Keys: Atom `id`, RSS `guid`, RDF
/// `rdf:about`, JSON Feed `id`, else the link, else a digest of title and date. An entry's
/// fingerprint is its `updated` date when it has one, else its title and text: an edited entry
/// is `changed`, and a feed that only reorders its entries changes nothing.
package struct FeedProvider: Provider {
    package var url: URL
    /// `url` was given as a secret (`url_file` …): shown without its query.
    package var urlIsSecret = false
    package var headers: HeaderTable
    package var include: [SafeRegex]
    package var exclude: [SafeRegex]
    package var maxEntries: Int
    /// `ca_file`: the CAs trusted for https instead of the system's.
    package var caFile: String?

    package static let defaultMaxEntries = 500
    /// An entry's title and text are cut to these many characters.
    static let maxTitle = 300
    static let maxBody = 2000

    package init(
        url: URL, headers: HeaderTable = HeaderTable(), include: [SafeRegex] = [], exclude: [SafeRegex] = [],
        maxEntries: Int = FeedProvider.defaultMaxEntries, caFile: String? = nil
    ) {
        self.url = url
        self.caFile = caFile
        self.headers = headers
        self.include = include
        self.exclude = exclude
        self.maxEntries = maxEntries
    }

    /// A source with every option at its default: for the fuzz package (Fuzz/), which decodes
    /// documents from outside this package.
    package init(url: URL) { self.init(url: url, headers: HeaderTable()) }

    package var host: String? { url.host }
    /// A feed lists its latest entries, not all of them: an entry that scrolls off is not
    /// removed, and one that comes back (a publisher reorders, a 304 after a cut) is not new.
    package var snapshotIsComplete: Bool { false }

    package static let factory = ProviderFactory(name: "feed", summary: "RSS, Atom and JSON Feed entries") { o, _, _ in
        let (url, urlIsSecret) = try o.requestURLOption("url")
        var feed = FeedProvider(
            url: url, headers: try o.headers(), include: try ProviderSupport.patterns(o, "include"),
            exclude: try ProviderSupport.patterns(o, "exclude"),
            maxEntries: try o.int("max_entries", range: 1...100_000) ?? FeedProvider.defaultMaxEntries,
            caFile: try ProviderSupport.caFile(o))
        feed.urlIsSecret = urlIsSecret
        return feed
    }

    var credentials: Credentials { headers.carriesCredentials || url.user != nil || urlIsSecret ? .sent : .notSent }

    static let accept =
        "application/atom+xml, application/rss+xml, application/feed+json, application/json;q=0.9, "
        + "application/xml;q=0.9, text/xml;q=0.9, */*;q=0.8"

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        let hdrs: [(String, String)] = [("Accept", Self.accept)] + headers.pairs + ctx.validators.requestHeaders
        let response = try await ctx.send("GET", url, headers: hdrs, credentials: credentials, caFile: caFile)
        if response.status == 304 { return .notModified }
        guard (200..<300).contains(response.status) else {
            throw PollError.http(response, credentials: credentials, detail: PollError.excerpt(response.body))
        }
        let parsed = try parse(response.body, charset: Self.charset(ofContentType: response.header("content-type")))
        if parsed.repaired {
            Log.warnOnce(
                "feed repaired \(ctx.source)",
                """
                the feed at \(ShownURL.of(url, query: !urlIsSecret)) is not well-formed XML: read in recovery mode, entries that \
                could not be read are missing
                """, logger: ctx.logger)
        }
        return .snapshot(parsed.items, validators: Validators(from: response))
    }

    /// A successful response body → items (pure: what `poll` does after the request).
    package func decode(_ body: Data, charset: String? = nil) throws -> [Item] {
        try parse(body, charset: charset).items
    }

    struct Parsed {
        var items: [Item]
        /// libxml2 had to repair the document (not well-formed).
        var repaired = false
    }

    func parse(_ body: Data, charset: String?) throws -> Parsed {
        var bytes = [UInt8](body)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]), JSONFeed.looksLikeJSON(bytes.dropFirst(3)) { bytes.removeFirst(3) }
        let entries: [Entry]
        var repaired = false
        if JSONFeed.looksLikeJSON(bytes[...]) {
            entries = try JSONFeed.entries(Data(bytes), feedURL: url, limit: maxEntries)
        } else {
            let xml = try XMLFeed.entries(bytes, charset: charset, feedURL: url, limit: maxEntries)
            entries = xml.0
            repaired = xml.1
        }
        var seen: Set<String> = []
        var items: [Item] = []
        for entry in entries {
            let item = entry.item()
            if !include.isEmpty, !include.contains(where: { $0.matches(in: item.title) }) { continue }
            if exclude.contains(where: { $0.matches(in: item.title) }) { continue }
            guard seen.insert(item.key).inserted else { continue }  // the first of entries with one key
            items.append(item)
        }
        return Parsed(items: items, repaired: repaired)
    }

    /// `charset` of a `Content-Type` header (`text/xml; charset="ISO-8859-1"` → `ISO-8859-1`).
    static func charset(ofContentType value: String?) -> String? {
        guard let value else { return nil }
        for part in value.split(separator: ";").dropFirst() {
            let kv = part.split(separator: "=", maxSplits: 1).map { $0.trimmed(newlines: false) }
            guard kv.count == 2, kv[0].lowercased() == "charset" else { continue }
            let name = kv[1].trimming(scalarsIn: "\"'")
            return name.isEmpty ? nil : name
        }
        return nil
    }
}

// MARK: - Entries

/// One entry as read from any of the formats, before it becomes an item.
struct Entry {
    var id: String?
    var link: String?
    var title = ""
    var body = ""
    var published: String?
    var updated: String?
    var author: String?
    var categories: [String] = []
    var enclosures: [JSONValue] = []

    func item() -> Item {
        let text = self.body
        let title = FeedText.cut(self.title.isEmpty ? FeedText.firstLine(text) : self.title, FeedProvider.maxTitle)
        let body = FeedText.cut(text, FeedProvider.maxBody)
        let date = published ?? updated
        // No id and no link: title and date (and the text, when there is no date either).
        let key =
            (nonEmpty(id) ?? nonEmpty(link)).map(FeedText.identity)
            ?? Fingerprint.of(["feed-entry", title, date ?? "", date == nil ? body : ""])
        var data: [String: JSONValue] = [
            "categories": .array(categories.prefix(50).map { JSONValue.string(FeedText.cut($0, 200)) }),
            "enclosures": .array(Array(enclosures.prefix(20))),
        ]
        if let published { data["published"] = .string(published) }
        if let updated { data["updated"] = .string(updated) }
        if let author = nonEmpty(author) { data["author"] = .string(FeedText.cut(author, 200)) }
        let fingerprint = updated.map { Fingerprint.of(["updated", $0]) } ?? Fingerprint.of(["text", title, body])
        return Item(
            key: key, kind: "entry", title: title.isEmpty ? "(untitled)" : title, body: body, url: link,
            data: .object(data), fingerprint: fingerprint)
    }

    private func nonEmpty(_ s: String?) -> String? {
        guard let t = s?.trimmed(), !t.isEmpty else { return nil }
        return t
    }
}

/// Text helpers: whitespace, cuts, dates, links.
enum FeedText {
    /// Query parameters that mark where a reader came from, not what they read: a publisher (or
    /// a feed proxy such as FeedBurner) that starts adding them to its links must not make every
    /// entry keyed by its link new again.
    static func isTracking(_ name: String) -> Bool {
        let n = name.lowercased()
        return n.hasPrefix("utm_")
            || [
                "fbclid", "gclid", "dclid", "msclkid", "yclid", "igshid", "mc_cid", "mc_eid",
                "_hsenc", "_hsmi", "mkt_tok", "oly_enc_id", "oly_anon_id", "vero_id",
            ].contains(n)
    }

    /// An entry's identity: its id or link as written, except that an http(s) URL loses its
    /// tracking parameters (the order and values of the others are kept).
    static func identity(_ key: String) -> String {
        guard key.hasPrefix("http://") || key.hasPrefix("https://") || key.hasPrefix("HTTP"),
            var c = URLComponents(string: key), let items = c.percentEncodedQueryItems,
            items.contains(where: { isTracking($0.name) })
        else { return key }
        let kept = items.filter { !isTracking($0.name) }
        c.percentEncodedQueryItems = kept.isEmpty ? nil : kept
        return c.string ?? key
    }

    /// Runs of whitespace (no-break spaces too) as one space, trimmed.
    static func line(_ s: String) -> String {
        s.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
    }

    /// Each line collapsed, blank lines dropped.
    static func block(_ s: String) -> String {
        s.split(whereSeparator: { $0.isNewline }).map { line(String($0)) }.filter { !$0.isEmpty }.joined(separator: "\n")
    }

    static func firstLine(_ s: String) -> String {
        s.split(whereSeparator: { $0.isNewline }).first.map(String.init) ?? ""
    }

    /// `s` in at most `limit` characters, scrubbed first: a secret the parser decoded (an
    /// entity, an escape) is never cut in two before the intake scrubs the item.
    static func cut(_ s: String, _ limit: Int) -> String {
        let s = Redactor.shared.scrub(s)
        guard s.count > limit else { return s }
        return String(s.prefix(limit - 1)) + "…"
    }

    /// An RFC 3339 or RFC 822 date as RFC 3339 UTC; anything else as given (trimmed).
    static func date(_ raw: String?) -> String? {
        guard let t = raw?.trimmed(), !t.isEmpty else { return nil }
        if let d = Timestamp.parse(t) ?? rfc822(t) { return Timestamp.format(d) }
        return t
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let zones: [String: Int] = [
        "gmt": 0, "ut": 0, "utc": 0, "z": 0, "est": -5, "edt": -4, "cst": -6, "cdt": -5, "mst": -7, "mdt": -6,
        "pst": -8, "pdt": -7,
    ]

    /// `Tue, 10 Jun 2003 04:00:00 GMT` and its common variants (no weekday, no seconds, a
    /// two-digit year, a named or numeric zone).
    static func rfc822(_ s: String) -> Date? {
        var parts = s.split(whereSeparator: { $0 == " " || $0 == "," }).map { String($0) }
        if let first = parts.first, Int(first) == nil { parts.removeFirst() }
        guard parts.count >= 4, let day = Int(parts[0]),
            let month = months.firstIndex(of: String(parts[1].lowercased().prefix(3))), var year = Int(parts[2])
        else { return nil }
        if year < 100 { year += year < 50 ? 2000 : 1900 }
        let hms = parts[3].split(separator: ":").compactMap { Int($0) }
        guard hms.count >= 2 else { return nil }
        var offset = 0
        if parts.count >= 5 {
            let z = parts[4]
            if let sign = z.first, sign == "+" || sign == "-", let n = Int(z.dropFirst()), z.count == 5 {
                offset = (n / 100 * 3600 + n % 100 * 60) * (sign == "-" ? -1 : 1)
            } else if let h = zones[z.lowercased()] {
                offset = h * 3600
            }
        }
        var c = DateComponents()
        (c.year, c.month, c.day, c.hour, c.minute, c.second) = (year, month + 1, day, hms[0], hms[1], hms.count > 2 ? hms[2] : 0)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let local = calendar.date(from: c) else { return nil }
        return local.addingTimeInterval(TimeInterval(-offset))
    }

    /// `href` made absolute against `bases` (outermost first, e.g. `xml:base` values) and then
    /// `feedURL`; only http and https links are kept.
    static func absolute(_ href: String?, bases: [String] = [], feedURL: URL) -> String? {
        guard let href = href?.trimmed(), !href.isEmpty else { return nil }
        var base = feedURL
        for b in bases {
            if let u = URL(string: b.trimmed(), relativeTo: base)?.absoluteURL { base = u }
        }
        guard let u = URL(string: href, relativeTo: base)?.absoluteURL,
            let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        return u.absoluteString
    }
}

// MARK: - JSON Feed

enum JSONFeed {
    static func looksLikeJSON(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{")
    }

    static func entries(_ body: Data, feedURL: URL, limit: Int) throws -> [Entry] {
        let doc = try ProviderSupport.json(body, what: "JSON Feed")
        guard let version = doc["version"]?.stringValue, version.hasPrefix("https://jsonfeed.org/version/") else {
            throw PollError(.transient, "JSON, but not a JSON Feed (no \"version\": \"https://jsonfeed.org/version/1.1\")")
        }
        guard let items = doc["items"]?.arrayValue else { throw PollError(.transient, "JSON Feed without an \"items\" list") }
        return items.prefix(limit).map { entry($0, feedURL: feedURL) }
    }

    static func entry(_ j: JSONValue, feedURL: URL) -> Entry {
        var e = Entry()
        // 1.0 feeds sometimes send a number: its decimal string (stringValue writes 42, not 42.0).
        switch j["id"] {
        case .string(let s)?: e.id = s
        case .number?: e.id = j["id"]?.stringValue
        default: break
        }
        e.link = FeedText.absolute(j["url"]?.stringValue ?? j["external_url"]?.stringValue, feedURL: feedURL)
        e.title = FeedText.line(j["title"]?.stringValue ?? "")
        if let text = j["content_text"]?.stringValue {
            e.body = FeedText.block(text)
        } else if let summary = j["summary"]?.stringValue {
            e.body = FeedText.block(summary)
        } else if let html = j["content_html"]?.stringValue {
            e.body = HTMLText.text(html)
        }
        e.published = FeedText.date(j["date_published"]?.stringValue)
        e.updated = FeedText.date(j["date_modified"]?.stringValue)
        let authors = j["authors"]?.arrayValue ?? (j["author"].map { [$0] } ?? [])
        e.author = authors.compactMap { $0["name"]?.stringValue }.first
        e.categories = (j["tags"]?.arrayValue ?? []).compactMap(\.stringValue)
        e.enclosures = (j["attachments"]?.arrayValue ?? []).compactMap { a in
            guard let u = FeedText.absolute(a["url"]?.stringValue, feedURL: feedURL) else { return nil }
            var o: [String: JSONValue] = ["url": .string(u)]
            if let t = a["mime_type"]?.stringValue { o["type"] = .string(t) }
            if let n = a["size_in_bytes"]?.doubleValue { o["length"] = .number(n) }
            return .object(o)
        }
        return e
    }
}
