import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "github"`: a user's unread notifications, or a repository's releases, through
/// GitHub's REST API (DESIGN §12; docs/providers/github.md).
///
/// ```toml
/// provider = "github"
/// watch = "notifications"            # or "releases" (then `repo = "OWNER/NAME"`)
/// token_file = "~/.config/tidings/github.token"
/// api_url = "https://api.github.com" # GitHub Enterprise Server: "https://HOST/api/v3"
/// participating = false              # notifications: only threads you take part in
/// prereleases = false                # releases: report pre-releases too
/// ```
/// Notifications: kind `notification`, key the thread id, fingerprint its `updated_at` (new
/// activity on a thread is `changed`); a thread read elsewhere leaves the unread list and is
/// `removed`. Requests carry `If-Modified-Since` (the last `Last-Modified`), and the
/// `X-Poll-Interval` of every answer becomes the source's minimum interval
/// (``PollResult/minimumInterval``). Releases: kind `release`, key the release id, a window
/// onto the newest releases (a release that pages out is not removed); drafts never,
/// pre-releases only with `prereleases = true`.
///
/// The token goes to `api_url`'s origin only: redirects elsewhere fail the poll naming the
/// target, and a `Link` to another origin is not followed. A rate limit (403/429 with
/// `x-ratelimit-remaining: 0`, or `Retry-After`) leaves the source failing until the reset,
/// never `auth-failed`; a 401 is `auth-failed`.
package struct GitHubProvider: Provider {
    package enum Watch: String, Sendable, CaseIterable {
        case notifications, releases
    }

    package var watch: Watch
    package var apiURL: URL
    /// `OWNER/NAME` (releases).
    package var repo: String?
    let token: Secret?
    package var participating: Bool
    package var prereleases: Bool
    /// `ca_file`: trust this CA (a GitHub Enterprise Server with a private CA) instead of the system's.
    package var caFile: String?

    package static let defaultAPI = "https://api.github.com"
    /// The API's largest pages: 50 notification threads, 100 releases.
    static let notificationsPerPage = 50
    static let releasesPerPage = 100
    /// Pages read per poll. Notifications are the whole unread list (a thread missing from it
    /// is removed), so a longer list fails the poll instead of being cut; releases are a window
    /// onto the newest, so reading stops there.
    static let maxNotificationPages = 20
    static let maxReleasePages = 3
    static let maxTitle = 300
    static let maxBody = 2000
    /// A rate limit without a reset time or `Retry-After`: GitHub says to wait at least a minute.
    static let defaultRateLimitWait: TimeInterval = 60

    package init(
        watch: Watch = .notifications, apiURL: URL, repo: String? = nil, token: Secret?,
        participating: Bool = false, prereleases: Bool = false, caFile: String? = nil
    ) {
        self.watch = watch
        self.caFile = caFile
        self.apiURL = apiURL
        self.repo = repo
        self.token = token
        self.participating = participating
        self.prereleases = prereleases
    }

    package var host: String? { apiURL.host }
    /// The unread list is complete (a thread read elsewhere is removed); releases are a window.
    package var snapshotIsComplete: Bool { watch == .notifications }

    package static let factory = ProviderFactory(name: "github", summary: "GitHub notifications or a repository's releases") { o, _, _ in
        let watchText = try o.string("watch") ?? Watch.notifications.rawValue
        guard let watch = Watch(rawValue: watchText) else {
            throw o.error("watch", "\(o.what): 'watch' must be \"notifications\" or \"releases\", not \"\(watchText)\"")
        }
        let api = try ProviderSupport.baseURL(o, "api_url", default: defaultAPI)
        if api.scheme?.lowercased() == "http" && !Loopback.contains(api) {
            throw o.error("api_url", "\(o.what): 'api_url' must be https:// (plain http is allowed on loopback only: the token would travel in clear)")
        }
        if api.query != nil || api.fragment != nil || api.user != nil {
            throw o.error("api_url", "\(o.what): 'api_url' must be the API's base URL, without user, query or fragment")
        }
        func only(_ key: String, for wanted: Watch) throws {
            if watch != wanted, o.has(key) {
                throw o.error(key, "\(o.what): '\(key)' is an option of watch = \"\(wanted.rawValue)\", not \"\(watch.rawValue)\"")
            }
        }
        try only("repo", for: .releases)
        try only("prereleases", for: .releases)
        try only("participating", for: .notifications)
        var repo: String?
        if watch == .releases {
            let r = try o.requiredString("repo")
            guard isRepoName(r) else {
                throw o.error("repo", "\(o.what): 'repo' must be OWNER/NAME (letters, digits, '-', and '.' or '_' in the name), not \"\(r)\"")
            }
            repo = r
        }
        return GitHubProvider(
            watch: watch, apiURL: api, repo: repo, token: try o.secret("token", required: watch == .notifications),
            participating: try o.bool("participating") ?? false, prereleases: try o.bool("prereleases") ?? false,
            caFile: try ProviderSupport.caFile(o))
    }

    /// `OWNER/NAME` as GitHub allows them: an owner of letters, digits and single inner
    /// hyphens (at most 39), a name of letters, digits, `-`, `_` and `.` (not `.` or `..`).
    static func isRepoName(_ s: String) -> Bool {
        let parts = s.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        let (owner, name) = (parts[0], parts[1])
        let alnum = { (c: Character) in c.isASCII && (c.isLetter || c.isNumber) }
        guard (1...39).contains(owner.count), owner.allSatisfy({ alnum($0) || $0 == "-" }),
            owner.first != "-", owner.last != "-", !owner.contains("--")
        else { return false }
        guard (1...100).contains(name.count), name.allSatisfy({ alnum($0) || "-_.".contains($0) }),
            name != ".", name != ".."
        else { return false }
        return true
    }

    var credentials: Credentials { token != nil ? .sent : .notSent }

    /// The first page's URL.
    var listURL: URL {
        switch watch {
        case .notifications:
            var q = [URLQueryItem(name: "per_page", value: String(Self.notificationsPerPage))]
            if participating { q.append(URLQueryItem(name: "participating", value: "true")) }
            return ProviderSupport.join(apiURL, "/notifications", query: q)
        case .releases:
            return ProviderSupport.join(
                apiURL, "/repos/\(repo ?? "")/releases",
                query: [URLQueryItem(name: "per_page", value: String(Self.releasesPerPage))])
        }
    }

    var requestHeaders: [(String, String)] {
        var h = [("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", "2022-11-28")]
        if let token { h.append(("Authorization", "Bearer \(token.value)")) }
        return h
    }

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        var url = listURL
        var pace: TimeInterval?
        var validators = Validators()
        var items: [Item] = []
        let maxPages = watch == .notifications ? Self.maxNotificationPages : Self.maxReleasePages
        var read: Set<String> = [url.absoluteString]
        for page in 1... {
            // Conditional on the first page only: it decides whether anything changed.
            let conditional = page == 1 ? ctx.validators.requestHeaders : []
            let response = try await ctx.send("GET", url, headers: requestHeaders + conditional, credentials: credentials, caFile: caFile)
            pace = Self.pollInterval(response) ?? pace
            if page == 1 && response.status == 304 { return PollResult.notModified.paced(every: pace) }
            guard ProviderSupport.isSuccess(response) else { throw error(response, now: ctx.now) }
            if page == 1 { validators = Validators(from: response) }
            items += try decode(response.body)
            guard let next = Self.nextLink(response.header("link"), base: url) else { break }
            guard Origin(next) == Origin(apiURL) else {
                throw PollError(
                    .transient,
                    "the API's next page is on another origin (\(Redirect.display(next.absoluteString))): not followed, the token goes to \(Origin(apiURL).map(String.init(describing:)) ?? apiURL.absoluteString) only"
                )
            }
            // A `next` back to a page already read (itself, or an earlier one) would go round
            // until the page limit and then read as "too many unread threads".
            guard read.insert(next.absoluteString).inserted else {
                throw PollError(
                    .transient,
                    "the server's Link header points back to a page already read: \(Redirect.display(next.absoluteString)) (the next page of page \(page)); not followed"
                )
            }
            if page == maxPages {
                guard watch == .notifications else { break }
                throw PollError(
                    .transient,
                    "more than \(maxPages * Self.notificationsPerPage) unread notification threads (\(maxPages) pages): not all read, so none is reported as read; mark some read, or set participating = true"
                )
            }
            url = next
        }
        var seen: Set<String> = []
        items = items.filter { seen.insert($0.key).inserted }
        return PollResult.snapshot(items, validators: validators).paced(every: pace)
    }

    /// An unsuccessful answer as a poll error: a rate limit waits for its reset (or
    /// `Retry-After`), never `auth-failed`; a 401 (and a 403 that is no rate limit) with a token
    /// is rejected credentials.
    func error(_ response: HTTPResponse, now: Date) -> PollError {
        let detail = Self.message(response.body)
        let limited = response.status == 429 || (response.status == 403 && response.signalsRateLimit)
        guard limited else { return PollError.http(response, credentials: credentials, detail: detail) }
        var wait = response.retryAfter
        var why = response.retryAfter.map { "Retry-After \(DurationParser.format($0))" }
        if wait == nil, response.header("x-ratelimit-remaining")?.trimmed(newlines: false) == "0",
            let reset = response.header("x-ratelimit-reset").flatMap({ Double($0.trimmed(newlines: false)) }), reset.isFinite
        {
            // Epoch seconds; a second more, as GitHub's clock and ours may differ.
            wait = min(max(0, reset - now.timeIntervalSince1970) + 1, HTTPResponse.maxRetryAfter)
            why =
                "rate limit exhausted, resets at \(Timestamp.format(Date(timeIntervalSince1970: min(reset, now.timeIntervalSince1970 + HTTPResponse.maxRetryAfter))))"
        }
        let text = "HTTP \(response.status) (rate limited: \(why ?? "no reset time given, waiting \(DurationParser.format(Self.defaultRateLimitWait))"))"
        return PollError(.rateLimited, text + (detail.map { ": \($0)" } ?? ""), retryAfter: wait ?? Self.defaultRateLimitWait)
    }

    /// The `message` of GitHub's error body, else an excerpt of the body.
    static func message(_ body: Data) -> String? {
        if body.isEmpty { return nil }
        if let m = (try? JSONValue.parse(body))?["message"]?.stringValue { return FeedText.cut(Self.line(m), 200) }
        return PollError.excerpt(body)
    }

    /// `X-Poll-Interval` in seconds (a positive number), else nil.
    static func pollInterval(_ response: HTTPResponse) -> TimeInterval? {
        guard let raw = response.header("x-poll-interval"), let s = Double(raw.trimmed(newlines: false)),
            s.isFinite, s > 0
        else { return nil }
        return s
    }

    /// The `rel="next"` target of a `Link` header (RFC 8288), resolved against `base`; only http(s).
    static func nextLink(_ header: String?, base: URL) -> URL? {
        guard let header else { return nil }
        var rest = Substring(header)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { return nil }
            let target = rest[rest.index(after: open)..<close]
            // Parameters run to the next link (a ',' outside quotes).
            var params = ""
            var quoted = false
            var i = rest.index(after: close)
            while i < rest.endIndex {
                let c = rest[i]
                if c == "\"" { quoted.toggle() }
                if c == "," && !quoted { break }
                params.append(c)
                i = rest.index(after: i)
            }
            rest = i < rest.endIndex ? rest[rest.index(after: i)...] : ""
            let rels = params.split(separator: ";").compactMap { p -> [String]? in
                let kv = p.split(separator: "=", maxSplits: 1).map { $0.trimmed(newlines: false) }
                guard kv.count == 2, kv[0].lowercased() == "rel" else { return nil }
                return kv[1].trimming(scalarsIn: "\"").lowercased().split(separator: " ").map(String.init)
            }.flatMap { $0 }
            guard rels.contains("next") else { continue }
            guard let url = URL(string: String(target), relativeTo: base)?.absoluteURL, Origin(url) != nil else { return nil }
            return url
        }
        return nil
    }

    // MARK: - Decoding

    /// One page's body → items (pure: what `poll` does with each page).
    package func decode(_ body: Data) throws -> [Item] {
        let json = try ProviderSupport.json(body, what: "GitHub \(watch.rawValue)")
        guard let list = json.arrayValue else {
            throw PollError(.transient, "GitHub \(watch.rawValue): expected a JSON array (body: \(PollError.excerpt(body)))")
        }
        switch watch {
        case .notifications: return list.compactMap(notification)
        case .releases: return list.compactMap(release)
        }
    }

    func notification(_ j: JSONValue) -> Item? {
        guard let id = j["id"]?.stringValue, !id.isEmpty else { return nil }
        let subject = j["subject"]
        let repo = j["repository"]?["full_name"]?.stringValue.map(Self.line) ?? ""
        let reason = j["reason"]?.stringValue.map(Self.line) ?? ""
        let type = subject?["type"]?.stringValue.map(Self.line) ?? ""
        let title = FeedText.cut(Self.line(subject?["title"]?.stringValue ?? ""), Self.maxTitle)
        let updated = j["updated_at"]?.stringValue ?? ""
        let body = [reason.replacingScalars("_", with: " "), repo].filter { !$0.isEmpty }.joined(separator: " · ")
        var data: [String: JSONValue] = ["reason": .string(reason), "repository": .string(repo), "type": .string(type)]
        if !updated.isEmpty { data["updated_at"] = .string(updated) }
        if let api = subject?["url"]?.stringValue { data["api_url"] = .string(api) }
        return Item(
            key: id, kind: "notification", title: title.isEmpty ? "(untitled)" : title,
            body: FeedText.cut(body, Self.maxBody), url: webURL(subject: subject, repository: j["repository"]),
            severity: reason == "security_alert" ? .warning : .info, data: .object(data),
            fingerprint: Fingerprint.of(["github-thread", updated, title]))
    }

    func release(_ j: JSONValue) -> Item? {
        guard let id = j["id"]?.stringValue, !id.isEmpty, j["draft"]?.boolValue != true else { return nil }
        let pre = j["prerelease"]?.boolValue == true
        if pre && !prereleases { return nil }
        let tag = FeedText.cut(Self.line(j["tag_name"]?.stringValue ?? ""), 200)
        let name = FeedText.cut(Self.line(j["name"]?.stringValue ?? ""), Self.maxTitle)
        let notes = FeedText.cut(FeedText.block(Self.printable(j["body"]?.stringValue ?? "")), Self.maxBody)
        let body = [name == tag ? "" : name, notes].filter { !$0.isEmpty }.joined(separator: "\n")
        var data: [String: JSONValue] = ["tag": .string(tag), "name": .string(name), "prerelease": .bool(pre)]
        if let p = j["published_at"]?.stringValue { data["published_at"] = .string(p) }
        return Item(
            key: id, kind: "release", title: FeedText.cut("\(repo ?? "") \(tag.isEmpty ? name : tag)", Self.maxTitle),
            body: body, url: Self.httpURL(j["html_url"]?.stringValue), data: .object(data),
            fingerprint: Fingerprint.of(["github-release", tag, name, pre ? "pre" : ""]))
    }

    /// The web origin of the API: `https://api.github.com` → `https://github.com`; GitHub
    /// Enterprise `https://HOST/api/v3` → `https://HOST`; any other API URL is its own origin.
    var webBase: URL {
        var c = URLComponents(url: apiURL, resolvingAgainstBaseURL: false)!
        if c.host?.lowercased() == "api.github.com" { c.host = "github.com" }
        c.path = c.path.hasSuffix("/api/v3") ? String(c.path.dropLast("/api/v3".count)) : c.path
        return c.url ?? apiURL
    }

    /// The web page of a thread's subject. Its API URL (`{api}/repos/O/R/issues/N`) maps to
    /// `{web}/O/R/issues/N` (`pulls/N` → `pull/N`, `commits/SHA` → `commit/SHA`). A release's
    /// API URL names it by id, which its page does not: the repository's releases page. Anything
    /// else (a discussion, a check suite, a subject without a URL): the repository's page.
    func webURL(subject: JSONValue?, repository: JSONValue?) -> String? {
        let repoPage = Self.httpURL(repository?["html_url"]?.stringValue)
        let prefix = apiURL.absoluteString + "/repos/"
        guard let api = subject?["url"]?.stringValue, api.hasPrefix(prefix) else { return repoPage }
        let parts = api.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // Path segments as GitHub makes them (names, numbers, hex): anything else is not mapped.
        let safe = { (p: String) in !p.isEmpty && p.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) } }
        guard parts.count >= 2, parts.allSatisfy(safe) else { return repoPage }
        let repoPath = "\(parts[0])/\(parts[1])"
        let web = webBase.absoluteString + "/" + repoPath
        guard parts.count == 4 else { return parts.count == 2 ? web : repoPage }
        switch parts[2] {
        case "issues": return "\(web)/issues/\(parts[3])"
        case "pulls": return "\(web)/pull/\(parts[3])"
        case "commits": return "\(web)/commit/\(parts[3])"
        case "releases": return "\(web)/releases"
        case "discussions": return "\(web)/discussions/\(parts[3])"
        default: return repoPage ?? web
        }
    }

    /// Text without control characters (terminal escapes, NUL, …) but line breaks.
    static func printable(_ s: String) -> String {
        var out = String.UnicodeScalarView()
        out.append(contentsOf: s.unicodeScalars.filter { $0.properties.generalCategory != .control || $0 == "\n" })
        return String(out)
    }

    /// One line of printable text, runs of whitespace as one space.
    static func line(_ s: String) -> String { FeedText.line(printable(s)) }

    static func httpURL(_ s: String?) -> String? {
        guard let s, let u = URL(string: s), let scheme = u.scheme?.lowercased(), ["http", "https"].contains(scheme), u.host != nil
        else { return nil }
        return u.absoluteString
    }
}
