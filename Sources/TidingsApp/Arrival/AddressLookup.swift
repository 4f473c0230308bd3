import FoundationEssentials
import Logging
import TidingsPluginAPI
import TidingsProviders

// `tidings add WHAT` looks before it decides (DESIGN §14): a web address is fetched through the
// process's HTTP client, as a provider's poll would fetch it (redirects, limits, TLS and the
// hostile-input rules are the providers'), and what answers makes the draft: a feed by its
// content, the feeds an HTML page announces, a page, JSON when told where its items are.
// Everything else (a GitHub repository, a certificate, a mailbox, a provider and its options)
// is read from the words alone; the sample poll that `add` runs before writing checks those.

/// What a person asked `tidings add` for.
package struct AddRequest: Sendable {
    /// `WHAT`, or a provider name followed by its arguments (`page URL`, `certificate HOST…`).
    package var words: [String]
    /// The program and its arguments of `tidings add exec -- …`.
    package var command: [String] = []
    /// `--pick N` (1-based) among the feeds a page announces.
    package var pick: Int? = nil
    /// `--select S`: watch the page's selection (`css:…` or `xpath:…`; a bare selector is CSS).
    package var select: String? = nil
    /// `--items POINTER`: where the items of a JSON response are (http-json).
    package var items: String? = nil
    /// `--github-api URL`: GitHub Enterprise, or a test's fake.
    package var githubAPI: String? = nil

    package init(words: [String]) { self.words = words }
}

/// Why `add` stops before writing, and the exit status it means (DESIGN §14).
package enum LookupFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Usage, or a question a non-interactive run cannot answer: exit 64.
    case usage(String)
    /// The address could not be reached or read: exit 69.
    case unreachable(String)

    package var description: String {
        switch self {
        case .usage(let m), .unreachable(let m): m
        }
    }
}

/// The draft `add` would write, and what it found on the way (the feeds a page offers).
package struct Lookup: Sendable, Equatable {
    package var draft: SourceDraft
    /// Lines for the person: what was fetched, what was offered and chosen.
    package var notes: [String]

    package init(draft: SourceDraft, notes: [String] = []) {
        self.draft = draft
        self.notes = notes
    }
}

package struct AddressLookup: Sendable {
    package var http: any HTTPClient
    /// A lookup's request waits at most this long (the sample poll's cap).
    package var timeout: Double = 10

    /// The providers `add PROVIDER …` knows how to fill in.
    package static let providerForms = ["feed", "page", "http-json", "github", "certificate", "imap", "exec"]
    static let accept =
        "text/html, application/xhtml+xml, application/atom+xml, application/rss+xml, application/feed+json, "
        + "application/json;q=0.9, */*;q=0.8"

    package init(http: any HTTPClient) { self.http = http }

    package func look(_ request: AddRequest, knownProviders: [String]) async throws(LookupFailure) -> Lookup {
        guard let what = request.words.first else {
            if !request.command.isEmpty { throw .usage("a command after -- is for `tidings add exec -- COMMAND…`") }
            throw .usage("tidings add WHAT: a web address, github.com/OWNER/REPO, HOST[:PORT], imaps://USER@HOST/MAILBOX, or a provider and its options")
        }
        let rest = Array(request.words.dropFirst())
        if knownProviders.contains(what) {
            return try await provider(what, rest, request)
        }
        if !request.command.isEmpty { throw .usage("a command after -- is for `tidings add exec -- COMMAND…`") }
        if !rest.isEmpty { throw .usage("one address at a time (extra: \(rest.joined(separator: " "))); a provider's options follow its name: tidings add page URL --select 'css'") }
        if request.items != nil, request.select != nil { throw .usage("--items (JSON) and --select (a page) do not go together") }
        if let repo = Self.githubRepository(what) { return github(repo, request) }
        if let scheme = Self.scheme(of: what) {
            switch scheme {
            case "http", "https": return try await web(what, request)
            case "imaps", "imap":
                // With a user: a mailbox; without one: the server's certificate.
                return WatchedAddress.parse(what)?.user != nil ? try mailbox(what) : certificate([what])
            case "smtp", "smtps": return certificate([what])
            default: throw .usage("\(what): tidings add reads http(s) addresses, smtp://, imap:// and imaps:// (a certificate), imaps://USER@HOST/MAILBOX")
            }
        }
        if Self.isHostAndPort(what) { return certificate([what]) }
        if what.contains("/" as Character), !what.hasPrefix("/"), !what.hasPrefix(".") {
            return try await web("https://" + what, request)
        }
        throw .usage(
            "\(what): not an address tidings add knows (a web address, github.com/OWNER/REPO, HOST[:PORT], imaps://USER@HOST/MAILBOX) nor a provider (\(Self.providerForms.joined(separator: ", ")))"
        )
    }

    // MARK: providers named

    func provider(_ name: String, _ args: [String], _ request: AddRequest) async throws(LookupFailure) -> Lookup {
        if name != "exec", !request.command.isEmpty { throw .usage("a command after -- is for `tidings add exec -- COMMAND…`") }
        func one(_ what: String) throws(LookupFailure) -> String {
            guard args.count == 1 else { throw .usage("tidings add \(name) \(what)") }
            return args[0]
        }
        switch name {
        case "feed":
            let url = try one("URL")
            let (response, final) = try await fetch(try Self.webURL(url))
            guard let items = PageLookup.feedItems(response.body, contentType: response.header("content-type"), url: final) else {
                throw .unreachable("\(url) does not read as an RSS, Atom or JSON feed")
            }
            return Lookup(draft: feedDraft(url, from: url, comment: "An RSS, Atom or JSON feed (\(Self.entries(items.count)) when added)."))
        case "page":
            let url = try one("URL [--select 'css']")
            return try await web(url, request, forced: "page")
        case "http-json":
            let url = try one("URL --items /POINTER")
            return try await web(url, request, forced: "http-json")
        case "github":
            let target = try one("OWNER/REPO")
            guard let repo = Self.githubRepository(target) ?? Self.githubRepository("github.com/" + target) else {
                throw .usage("\(target): not a GitHub repository (OWNER/REPO or https://github.com/OWNER/REPO)")
            }
            return github(repo, request)
        case "certificate":
            guard !args.isEmpty else { throw .usage("tidings add certificate HOST[:PORT]|smtp://HOST|imap://HOST…") }
            return certificate(args)
        case "imap":
            return try mailbox(try one("imaps://USER@HOST[:PORT]/MAILBOX"))
        case "exec":
            guard args.isEmpty else { throw .usage("tidings add exec -- COMMAND [ARGUMENT…]: the command follows --") }
            guard let program = request.command.first, !program.isEmpty else { throw .usage("tidings add exec -- COMMAND [ARGUMENT…]") }
            let base = PathText.lastComponent(program)
            return Lookup(
                draft: SourceDraft(
                    name: base, provider: "exec",
                    options: [SourceOption("command", .strings(request.command), comment: "The program and each argument; its output is read as JSON lines or Nagios plugin output.")],
                    comments: ["Runs a command at each poll (docs/providers/exec.md)."]))
        default:
            throw .usage(
                "tidings add knows \(Self.providerForms.joined(separator: ", ")); a \(name) source is written by hand: plugins.d/NAME.toml (see the \(name) provider's page)"
            )
        }
    }

    // MARK: web addresses

    /// Fetches `address` and decides: a feed, a page announcing feeds, a page, JSON.
    func web(_ address: String, _ request: AddRequest, forced: String? = nil) async throws(LookupFailure) -> Lookup {
        let url = try Self.webURL(address)
        let (response, final) = try await fetch(url)
        let type = response.header("content-type")
        let shown = ShownURL.of(url)
        var notes: [String] = []
        if final.absoluteString != url.absoluteString { notes.append("\(shown) led to \(ShownURL.of(final))") }
        if forced == nil, request.select == nil, request.items == nil,
            let items = PageLookup.feedItems(response.body, contentType: type, url: final)
        {
            if request.pick != nil { throw .usage("--pick: \(shown) is a feed itself, not a page offering feeds") }
            notes.append("\(shown) is a feed (\(Self.entries(items.count)))")
            return Lookup(draft: feedDraft(address, from: address, comment: "An RSS, Atom or JSON feed, found at \(shown)."), notes: notes)
        }
        if forced == "http-json" || (forced == nil && request.items != nil) || (PageLookup.looksLikeJSON(response.body) && !PageLookup.isMarkup(contentType: type, body: response.body)) {
            guard PageLookup.looksLikeJSON(response.body) else { throw .unreachable("\(shown) does not answer JSON (Content-Type: \(type ?? "none"))") }
            guard let items = request.items else {
                throw .usage("\(shown) answers JSON: say where its items are with --items /POINTER (a JSON pointer, \"\" for the whole document; see the http-json provider)")
            }
            let options = [SourceOption("url", .string(address)), SourceOption("items", .string(items), comment: "JSON pointer to the list of items.")]
            return Lookup(
                draft: SourceDraft(
                    name: SourceFileWriter.name(forURL: address), provider: "http-json", options: options,
                    comments: [
                        "A JSON endpoint (docs/providers/http-json.md). Say what an item is with JSON pointers",
                        "or templates into each one, e.g. key = \"/id\" and title = \"{/name} is {/status}\"",
                        "(without a key an item is its whole content: any change reads as removed + new).",
                    ],
                    watchedURL: address),
                notes: notes)
        }
        guard PageLookup.isMarkup(contentType: type, body: response.body) else {
            throw .unreachable("\(shown) answers \(type ?? "no Content-Type"): neither a feed, an HTML page nor JSON")
        }
        if forced == nil, request.select == nil {
            let feeds: [AnnouncedFeed]
            do {
                feeds = try PageLookup.announcedFeeds(response.body, contentType: type, pageURL: final)
            } catch {
                throw .unreachable("\(shown): the page cannot be read: \(error)")
            }
            if !feeds.isEmpty {
                let index = (request.pick ?? 1) - 1
                let listed = feeds.enumerated().map { i, f in
                    "  \(i + 1). \(f.url)\(f.title.map { " (\($0))" } ?? "")\(i == index ? "  ← chosen" : "")"
                }
                guard feeds.indices.contains(index) else {
                    throw .usage("--pick \(request.pick ?? 0): \(shown) announces \(feeds.count) feed\(feeds.count == 1 ? "" : "s"):\n" + listed.joined(separator: "\n"))
                }
                let chosen = feeds[index]
                if feeds.count > 1 {
                    notes.append("\(shown) announces \(feeds.count) feeds (another with --pick N):")
                    notes += listed
                } else {
                    notes.append("\(shown) announces the feed \(chosen.url)")
                }
                guard let feedURL = URL(string: chosen.url) else { throw .unreachable("\(chosen.url): not an address") }
                let (feedResponse, feedFinal) = try await fetch(feedURL, what: "the feed \(chosen.url) announced by \(shown)")
                guard let items = PageLookup.feedItems(feedResponse.body, contentType: feedResponse.header("content-type"), url: feedFinal) else {
                    throw .unreachable("the feed \(chosen.url) announced by \(shown) does not read as RSS, Atom or JSON Feed")
                }
                notes.append("\(chosen.url) is a feed (\(Self.entries(items.count)))")
                let title = chosen.title.map { " \"\($0)\"" } ?? ""
                return Lookup(
                    draft: feedDraft(chosen.url, from: address, comment: "The feed\(title) announced by \(shown)."),
                    notes: notes)
            }
            if request.pick != nil { throw .usage("--pick: \(shown) announces no feed") }
        }
        // A page: its text, or the selection.
        let title = PageLookup.title(response.body, contentType: type)
        var options = [SourceOption("url", .string(address))]
        if let select = request.select {
            let s = select.hasPrefix("css:") || select.hasPrefix("xpath:") ? select : "css:" + select
            options.append(SourceOption("select", .string(s), comment: "The part of the page compared (css:SELECTOR or xpath:EXPR)."))
        } else {
            notes.append("\(shown) announces no feed: watching the page's text (narrow it with --select 'css')")
        }
        var comments = ["A web page\(title.map { " (\"\($0)\")" } ?? ""): a change of its text is a \"changed\" event with the diff (docs/providers/page.md)."]
        if request.select == nil {
            comments.append("Without 'select' the whole page's text is compared: narrow it to what matters, e.g.")
            comments.append("select = \"css:main\"   or   select = \"xpath://div[@id='news']\"")
        }
        return Lookup(
            draft: SourceDraft(name: SourceFileWriter.name(forURL: address), provider: "page", options: options, comments: comments, watchedURL: address),
            notes: notes)
    }

    static func entries(_ n: Int) -> String { n == 1 ? "1 entry" : "\(n) entries" }

    func feedDraft(_ url: String, from address: String, comment: String) -> SourceDraft {
        SourceDraft(
            name: SourceFileWriter.name(forURL: address), provider: "feed", options: [SourceOption("url", .string(url))],
            comments: [comment, "New entries are \"new\" events; filter them with include/exclude (docs/providers/feed.md)."],
            watchedURL: url)
    }

    /// One GET as a provider's poll sends it; the response (2xx) and the URL it came from.
    func fetch(_ url: URL, what: String? = nil) async throws(LookupFailure) -> (HTTPResponse, URL) {
        let context = PollContext(source: "add", http: http, timeout: timeout, logger: Log.logger("add"))
        let shown = what ?? ShownURL.of(url)
        let response: HTTPResponse
        do {
            response = try await context.send("GET", url, headers: [("Accept", Self.accept)], credentials: .notSent)
        } catch let e as PollError {
            throw .unreachable("\(shown) cannot be reached: \(e.message)")
        } catch {
            throw .unreachable("\(shown) cannot be reached: \(error)")
        }
        guard (200..<300).contains(response.status) else {
            throw .unreachable("\(shown) answers HTTP \(response.status)")
        }
        return (response, response.url ?? url)
    }

    // MARK: words alone

    func github(_ repo: (owner: String, name: String), _ request: AddRequest) -> Lookup {
        var options = [
            SourceOption("watch", .string("releases")),
            SourceOption("repo", .string("\(repo.owner)/\(repo.name)")),
            SourceOption("prereleases", .boolean(false), comment: "true: report pre-releases too."),
        ]
        if let api = request.githubAPI {
            options.append(SourceOption("api_url", .string(api), comment: "The API's base URL (GitHub Enterprise Server: https://HOST/api/v3)."))
        }
        return Lookup(
            draft: SourceDraft(
                name: "\(repo.owner)-\(repo.name)", provider: "github", options: options,
                comments: [
                    "The releases of github.com/\(repo.owner)/\(repo.name) (docs/providers/github.md).",
                    "Unauthenticated: 60 requests an hour per address; a token raises that (token_file = \"…\").",
                ],
                watchedURL: "https://github.com/\(repo.owner)/\(repo.name)"))
    }

    func certificate(_ targets: [String]) -> Lookup {
        let first = targets[0]
        let host = WatchedAddress.parse(WatchedAddress.certificateTarget(first))?.host ?? first
        return Lookup(
            draft: SourceDraft(
                name: "cert-" + host, provider: "certificate",
                options: [SourceOption("targets", .strings(targets), comment: "host[:port] (TLS), https://, smtps://, imaps://, or smtp:// and imap:// (STARTTLS).")],
                comments: ["TLS certificates: a warning 21 days before one expires, critical at 7 (docs/providers/certificate.md)."],
                watchedURL: WatchedAddress.certificateTarget(first)))
    }

    /// `imaps://USER[:PASSWORD]@HOST[:PORT]/MAILBOX`: an imap source whose password is a secret
    /// file (a password in the address goes there, not in the config).
    func mailbox(_ address: String) throws(LookupFailure) -> Lookup {
        guard let a = WatchedAddress.parse(address), a.scheme == "imaps" || a.scheme == "imap", let user = a.user, !user.isEmpty else {
            throw .usage("\(address): a mailbox is imaps://USER@HOST[:PORT]/MAILBOX")
        }
        var password: String? = nil
        if let s = address.firstRange(of: "://") {
            let authority = address[s.upperBound...].prefix { $0 != "/" }
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                password = ConfigURL.percentDecoded(authority[authority.index(after: colon)..<at])
            }
        }
        let port = a.port.map { ":\($0)" } ?? ""
        let host = a.host.contains(":" as Character) && !a.host.hasPrefix("[") ? "[\(a.host)]" : a.host
        let path = a.path.isEmpty || a.path == "/" ? "/INBOX" : a.path
        let url = "\(a.scheme)://\(host)\(port)\(path)"
        let username = ConfigURL.percentDecoded(Substring(user))
        return Lookup(
            draft: SourceDraft(
                name: "\(username)-\(a.host)", provider: "imap",
                options: [
                    SourceOption("url", .string(url)), SourceOption("username", .string(username)),
                    SourceOption("search", .string("UNSEEN"), comment: "IMAP SEARCH criteria: which messages are items."),
                ],
                comments: ["A mailbox: each unseen message is an item (docs/providers/imap.md)."],
                watchedURL: "\(a.scheme)://\(WatchedAddress.percentEncodedUser(username))@\(host)\(port)\(path)",
                secrets: [SecretDraft(option: "password", value: password)]))
    }

    // MARK: reading words

    /// The address a request names, as a source would watch it, when the words alone say it
    /// (a web address, a GitHub repository, a mailbox): checked against the configured sources
    /// before anything is fetched.
    package static func watchedURL(of request: AddRequest) -> String? {
        var words = request.words
        if let first = words.first, ["feed", "page", "http-json", "github", "imap"].contains(first), words.count == 2 {
            words.removeFirst()
            if first == "github", githubRepository(words[0]) == nil { words[0] = "github.com/" + words[0] }
        }
        guard words.count == 1 else { return nil }
        let what = words[0]
        if let repo = githubRepository(what) { return "https://github.com/\(repo.owner)/\(repo.name)" }
        switch scheme(of: what) {
        case "http", "https": return what
        case "imaps", "imap": return WatchedAddress.parse(what)?.user != nil ? what : nil
        case nil: return !isHostAndPort(what) && what.contains("/" as Character) && !what.hasPrefix("/") && !what.hasPrefix(".") ? "https://" + what : nil
        default: return nil
        }
    }

    /// `github.com/OWNER/REPO[/…]`, with or without `https://` and `www.`.
    package static func githubRepository(_ what: String) -> (owner: String, name: String)? {
        var rest = Substring(what)
        for prefix in ["https://", "http://"] where rest.lowercased().hasPrefix(prefix) { rest = rest.dropFirst(prefix.count) }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 3, ["github.com", "www.github.com"].contains(parts[0].lowercased()) else { return nil }
        let owner = String(parts[1])
        var name = String(parts[2])
        if name.hasSuffix(".git") { name = String(name.dropLast(4)) }
        func valid(_ s: String, _ extra: Set<UInt8>) -> Bool {
            !s.isEmpty && s.utf8.allSatisfy { b in (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || extra.contains(b) }
        }
        guard valid(owner, [45]), valid(name, [45, 46, 95]) else { return nil }
        return (owner, name)
    }

    static func scheme(of what: String) -> String? {
        guard let r = what.firstRange(of: "://") else { return nil }
        let s = what[..<r.lowerBound]
        guard !s.isEmpty, s.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 65 && $0 <= 90) || ($0 >= 48 && $0 <= 57) || $0 == 43 || $0 == 45 || $0 == 46 }) else { return nil }
        return s.lowercased()
    }

    /// `HOST`, `HOST:PORT`, `[V6]:PORT`: a name with a dot (or `localhost`) or an address.
    static func isHostAndPort(_ what: String) -> Bool {
        guard let a = WatchedAddress.parse("tls://" + what), a.user == nil, a.path.isEmpty, a.query == nil else { return false }
        if let p = a.port, !(1...65_535).contains(p) { return false }
        let host = a.host
        if host.hasPrefix("[") { return true }
        let ok = host.utf8.allSatisfy { ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 46 }
        return ok && (host.contains("." as Character) || host == "localhost" || a.port != nil)
    }

    static func webURL(_ address: String) throws(LookupFailure) -> URL {
        guard let url = URL(string: address), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw .usage("\(address): not an http(s) address")
        }
        return url
    }
}
