import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

/// Answers requests from a script keyed by URL; records what was asked.
private final class ScriptedHTTP: HTTPClient, @unchecked Sendable {
    let lock = NSLock()
    var answers: [String: HTTPResponse]
    var asked: [HTTPRequest] = []
    init(_ answers: [String: HTTPResponse]) { self.answers = answers }
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        try lock.withLock {
            asked.append(request)
            guard let r = answers[request.url.absoluteString] else { throw HTTPClientError.transport("no answer for \(request.url)") }
            return r
        }
    }
}

/// `provider = "github"` (DESIGN §12): decoding, web URLs, pages, pacing, rate limits, options.
final class GitHubProviderTests: XCTestCase {
    let api = URL(string: "https://api.github.com")!
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func provider(_ watch: GitHubProvider.Watch = .notifications, api: URL? = nil, prereleases: Bool = false) -> GitHubProvider {
        GitHubProvider(
            watch: watch, apiURL: api ?? self.api, repo: watch == .releases ? "octo/hello" : nil,
            token: Secret("ghp_unitTestToken123"), prereleases: prereleases)
    }

    func context(_ http: any HTTPClient, validators: Validators = Validators()) -> PollContext {
        PollContext(source: "gh", http: http, validators: validators, logger: quietLogger, now: now)
    }

    func thread(_ id: String, type: String = "Issue", url: String? = nil, reason: String = "mention", title: String = "T") -> String {
        let u = url.map { "\"\($0)\"" } ?? "null"
        return """
            {"id": "\(id)", "unread": true, "reason": "\(reason)", "updated_at": "2026-11-20T10:00:00Z",
             "subject": {"title": "\(title)", "url": \(u), "type": "\(type)"},
             "repository": {"full_name": "octo/hello", "html_url": "https://github.com/octo/hello"}}
            """
    }

    func response(_ status: Int = 200, _ body: String = "[]", _ headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Data(body.utf8))
    }

    // MARK: items

    func testNotificationItemsAndWebURLs() throws {
        let body =
            "["
            + [
                thread("1", url: "https://api.github.com/repos/octo/hello/issues/12", title: "Crash on start"),
                thread("2", type: "PullRequest", url: "https://api.github.com/repos/octo/hello/pulls/13", reason: "review_requested"),
                thread("3", type: "Commit", url: "https://api.github.com/repos/octo/hello/commits/abc123"),
                thread("4", type: "Release", url: "https://api.github.com/repos/octo/hello/releases/987654"),
                thread("5", type: "CheckSuite"),
                thread("6", url: "https://evil.example/repos/octo/hello/issues/1"),
                thread("7", url: "https://api.github.com/repos/octo/hello/issues/1%0a\\u001b[31m"),
                thread("8", reason: "security_alert", title: "\\u001b]0;owned\\u0007Alert\\nline"),
            ].joined(separator: ",") + "]"
        let items = try provider().decode(Data(body.utf8))
        XCTAssertEqual(items.map(\.key), ["1", "2", "3", "4", "5", "6", "7", "8"])
        XCTAssertEqual(items[0].kind, "notification")
        XCTAssertEqual(items[0].title, "Crash on start")
        XCTAssertEqual(items[0].body, "mention · octo/hello")
        let repoPage = "https://github.com/octo/hello"
        XCTAssertEqual(
            items.map(\.url),
            [
                "https://github.com/octo/hello/issues/12", "https://github.com/octo/hello/pull/13",
                "https://github.com/octo/hello/commit/abc123", "https://github.com/octo/hello/releases",
                repoPage, repoPage, repoPage, repoPage,
            ], "a release's API URL names its id: the releases page; no URL, another origin or odd segments: the repository")
        XCTAssertEqual(items[1].body, "review requested · octo/hello")
        XCTAssertEqual(items[7].severity, .warning)
        XCTAssertEqual(items[7].title, "]0;ownedAlert line", "control characters removed")
        XCTAssertEqual(items[0].data["reason"], "mention")
        XCTAssertEqual(items[0].data["api_url"], "https://api.github.com/repos/octo/hello/issues/12")
    }

    func testANewCommentChangesTheFingerprint() throws {
        let a = try provider().decode(Data("[\(thread("1"))]".utf8))[0]
        let b = try provider().decode(Data("[\(thread("1").replacingOccurrences(of: "2026-11-20T10", with: "2026-11-21T10"))]".utf8))[0]
        XCTAssertNotEqual(a.fingerprint, b.fingerprint)
    }

    func testEnterpriseWebOrigin() throws {
        let ghe = provider(api: URL(string: "https://ghe.corp.test/api/v3")!)
        XCTAssertEqual(ghe.webBase.absoluteString, "https://ghe.corp.test")
        let item = try ghe.decode(Data("[\(thread("1", type: "PullRequest", url: "https://ghe.corp.test/api/v3/repos/o/r/pulls/2"))]".utf8))[0]
        XCTAssertEqual(item.url, "https://ghe.corp.test/o/r/pull/2")
        XCTAssertEqual(provider(api: URL(string: "http://127.0.0.1:8080")!).webBase.absoluteString, "http://127.0.0.1:8080")
    }

    func testReleasesSkipDraftsAndPrereleasesUnlessAsked() throws {
        let body = """
            [{"id": 3, "tag_name": "v3.0.0-rc1", "name": "RC", "draft": false, "prerelease": true, "html_url": "https://github.com/octo/hello/releases/tag/v3.0.0-rc1", "body": "x"},
             {"id": 2, "tag_name": "v2.1.0", "name": "v2.1.0", "draft": true, "prerelease": false, "html_url": "https://github.com/octo/hello/releases/tag/untagged-1"},
             {"id": 1, "tag_name": "v2.0.0", "name": "Big one", "draft": false, "prerelease": false, "html_url": "javascript:alert(1)", "body": "## Notes\\n\\n* a\\n* b", "published_at": "2026-11-20T10:00:00Z"}]
            """
        let stable = try provider(.releases).decode(Data(body.utf8))
        XCTAssertEqual(stable.map(\.key), ["1"])
        XCTAssertEqual(stable[0].kind, "release")
        XCTAssertEqual(stable[0].title, "octo/hello v2.0.0")
        XCTAssertEqual(stable[0].body, "Big one\n## Notes\n* a\n* b")
        XCTAssertNil(stable[0].url, "only http(s) links")
        XCTAssertEqual(try provider(.releases, prereleases: true).decode(Data(body.utf8)).map(\.key), ["3", "1"])
        XCTAssertFalse(provider(.releases).snapshotIsComplete, "releases are a window")
        XCTAssertTrue(provider().snapshotIsComplete, "the unread list is complete")
    }

    func testMalformedBodies() {
        XCTAssertThrowsError(try provider().decode(Data("{\"message\": \"x\"}".utf8)))
        XCTAssertThrowsError(try provider().decode(Data(("[" + String(repeating: "[", count: 100_000)).utf8)))
    }

    // MARK: Link

    func testNextLink() {
        let base = URL(string: "https://api.github.com/notifications")!
        let h =
            #"<https://api.github.com/notifications?page=1>; rel="prev", <https://api.github.com/notifications?page=3&a=b,c>; rel="next", <https://api.github.com/notifications?page=9>; rel="last""#
        XCTAssertEqual(GitHubProvider.nextLink(h, base: base)?.absoluteString, "https://api.github.com/notifications?page=3&a=b,c")
        XCTAssertEqual(GitHubProvider.nextLink(#"</x?page=2>; title="a, b"; rel="next""#, base: base)?.absoluteString, "https://api.github.com/x?page=2")
        XCTAssertNil(GitHubProvider.nextLink(#"<https://api.github.com/n?page=9>; rel="last""#, base: base))
        XCTAssertNil(GitHubProvider.nextLink(#"<javascript:x>; rel="next""#, base: base))
        XCTAssertNil(GitHubProvider.nextLink("<unterminated; rel=next", base: base))
        XCTAssertNil(GitHubProvider.nextLink(nil, base: base))
    }

    // MARK: poll

    func testPollPagesPacesAndSendsConditionalHeadersOnTheFirstPageOnly() async throws {
        let p1 = "https://api.github.com/notifications?per_page=50"
        let p2 = "https://api.github.com/notifications?per_page=50&page=2"
        let http = ScriptedHTTP([
            p1: response(
                200, "[\(thread("1"))]", ["link": "<\(p2)>; rel=\"next\"", "x-poll-interval": "60", "last-modified": "Thu, 26 Nov 2026 10:00:00 GMT"]),
            p2: response(200, "[\(thread("2")), \(thread("1"))]", ["x-poll-interval": "120"]),
        ])
        let result = try await provider().poll(context(http, validators: Validators(lastModified: "Wed, 25 Nov 2026 10:00:00 GMT")))
        guard case .snapshot(let items, let validators) = result.content else { return XCTFail("\(result)") }
        XCTAssertEqual(items.map(\.key), ["1", "2"], "a thread on two pages (the list moved) is one item")
        XCTAssertEqual(validators.lastModified, "Thu, 26 Nov 2026 10:00:00 GMT", "the first page's")
        XCTAssertEqual(result.minimumInterval, 120, "the latest X-Poll-Interval")
        XCTAssertEqual(http.asked.count, 2)
        let h1 = Dictionary(http.asked[0].headers, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(h1["If-Modified-Since"], "Wed, 25 Nov 2026 10:00:00 GMT")
        XCTAssertEqual(h1["Authorization"], "Bearer ghp_unitTestToken123")
        XCTAssertEqual(h1["Accept"], "application/vnd.github+json")
        XCTAssertEqual(h1["X-GitHub-Api-Version"], "2022-11-28")
        XCTAssertFalse(http.asked[1].headers.contains { $0.0 == "If-Modified-Since" })
        XCTAssertEqual(http.asked[0].redirects, .sameOrigin, "the token stays on api_url's origin")
    }

    func testNotModifiedCarriesThePollInterval() async throws {
        let http = ScriptedHTTP(["https://api.github.com/notifications?per_page=50": response(304, "", ["x-poll-interval": "90"])])
        let result = try await provider().poll(context(http))
        guard case .notModified = result.content else { return XCTFail("\(result)") }
        XCTAssertEqual(result.minimumInterval, 90)
    }

    func testANextPageOnAnotherOriginIsNotFollowed() async throws {
        let http = ScriptedHTTP([
            "https://api.github.com/notifications?per_page=50":
                response(200, "[]", ["link": "<https://api.github.com.evil.test/notifications?page=2>; rel=\"next\""])
        ])
        do {
            _ = try await provider().poll(context(http))
            XCTFail("followed")
        } catch let e as PollError {
            XCTAssertTrue(e.message.contains("https://api.github.com.evil.test/notifications?page=2"), e.message)
            XCTAssertEqual(http.asked.count, 1)
        }
    }

    /// Issue 30 item 17: a `next` back to a page already read was followed until the page limit
    /// and reported as "more than 1000 unread notification threads".
    func testALinkLoopIsReportedAsALoop() async throws {
        let first = "https://api.github.com/notifications?per_page=50"
        let second = first + "&page=2"
        for (watch, loops) in [(GitHubProvider.Watch.notifications, [first: first]), (.notifications, [first: second, second: first])] {
            var answers: [String: HTTPResponse] = [:]
            for (from, to) in loops { answers[from] = response(200, "[\(thread("1"))]", ["link": "<\(to)>; rel=\"next\""]) }
            let http = ScriptedHTTP(answers)
            do {
                _ = try await provider(watch).poll(context(http))
                XCTFail("no error")
            } catch let e as PollError {
                XCTAssertEqual(e.category, .transient)
                XCTAssertTrue(e.message.hasPrefix("the server's Link header points back to a page already read: \(first)"), e.message)
                XCTAssertFalse(e.message.contains("unread notification threads"), e.message)
                XCTAssertEqual(http.asked.count, loops.count)
            }
        }
        // Releases too (they stopped quietly at their page window, reporting what they had).
        let rel = "https://api.github.com/repos/octo/hello/releases?per_page=100"
        let http = ScriptedHTTP([rel: response(200, "[{\"id\": 1, \"tag_name\": \"v1\"}]", ["link": "<\(rel)>; rel=\"next\""])])
        do {
            _ = try await provider(.releases).poll(context(http))
            XCTFail("no error")
        } catch let e as PollError {
            XCTAssertTrue(e.message.contains("points back to a page already read"), e.message)
            XCTAssertEqual(http.asked.count, 1)
        }
    }

    func testTooManyUnreadPagesFailRatherThanReportRemovals() async throws {
        var answers: [String: HTTPResponse] = [:]
        for page in 1...GitHubProvider.maxNotificationPages {
            let url = "https://api.github.com/notifications?per_page=50" + (page == 1 ? "" : "&page=\(page)")
            answers[url] = response(
                200, "[\(thread(String(page)))]", ["link": "<https://api.github.com/notifications?per_page=50&page=\(page + 1)>; rel=\"next\""])
        }
        let http = ScriptedHTTP(answers)
        do {
            _ = try await provider().poll(context(http))
            XCTFail("no error")
        } catch let e as PollError {
            XCTAssertTrue(e.message.contains("more than 1000 unread"), e.message)
            XCTAssertEqual(http.asked.count, GitHubProvider.maxNotificationPages)
        }
        // Releases stop at their window quietly.
        var rel: [String: HTTPResponse] = [:]
        for page in 1...5 {
            let url = "https://api.github.com/repos/octo/hello/releases?per_page=100" + (page == 1 ? "" : "&page=\(page)")
            rel[url] = response(
                200, "[{\"id\": \(page), \"tag_name\": \"v\(page)\"}]",
                ["link": "<https://api.github.com/repos/octo/hello/releases?per_page=100&page=\(page + 1)>; rel=\"next\""])
        }
        let r = try await provider(.releases).poll(context(ScriptedHTTP(rel)))
        guard case .snapshot(let items, _) = r.content else { return XCTFail() }
        XCTAssertEqual(items.map(\.key), ["1", "2", "3"])
    }

    // MARK: errors

    func testRateLimitsAreRateLimitedNeverAuth() {
        let p = provider()
        let reset = String(Int(now.timeIntervalSince1970) + 600)
        let primary = p.error(
            response(
                403, #"{"message": "API rate limit exceeded for user ID 1."}"#,
                ["x-ratelimit-remaining": "0", "x-ratelimit-reset": reset]), now: now)
        XCTAssertEqual(primary.category, .rateLimited)
        XCTAssertEqual(primary.retryAfter, 601)
        XCTAssertTrue(
            primary.message.hasPrefix("HTTP 403 (rate limited: rate limit exhausted, resets at 2027-01-15T08:10:00Z): API rate limit exceeded"), primary.message
        )
        let secondary = p.error(response(429, #"{"message": "You have exceeded a secondary rate limit."}"#, ["retry-after": "30"]), now: now)
        XCTAssertEqual(secondary.category, .rateLimited)
        XCTAssertEqual(secondary.retryAfter, 30)
        let bare = p.error(response(403, #"{"message": "You have exceeded a secondary rate limit."}"#), now: now)
        XCTAssertEqual(bare.category, .rateLimited)
        XCTAssertEqual(bare.retryAfter, 60, "no reset given: a minute, as GitHub advises")
        let absurd = p.error(response(429, "", ["x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e300"]), now: now)
        XCTAssertEqual(absurd.retryAfter, HTTPResponse.maxRetryAfter)
        XCTAssertEqual(p.error(response(401, #"{"message": "Bad credentials"}"#), now: now).category, .auth)
        XCTAssertEqual(p.error(response(401, #"{"message": "Bad credentials"}"#), now: now).message, "HTTP 401: Bad credentials")
        XCTAssertEqual(p.error(response(403, #"{"message": "Resource not accessible by personal access token"}"#), now: now).category, .auth)
        XCTAssertEqual(p.error(response(404, #"{"message": "Not Found"}"#), now: now).category, .transient)
        XCTAssertEqual(p.error(response(502, "<html>"), now: now).category, .transient)
    }

    // MARK: options

    func testRepoNames() {
        for ok in ["octo/hello", "a/b", "my-org/repo.name_2", "x/.github"] { XCTAssertTrue(GitHubProvider.isRepoName(ok), ok) }
        for bad in [
            "octo", "octo/", "/x", "a/b/c", "-a/b", "a-/b", "a--b/c", "a/..", "a/.", "a b/c", "a/b c", "a/b?x", "ö/b",
            String(repeating: "a", count: 40) + "/b",
        ] {
            XCTAssertFalse(GitHubProvider.isRepoName(bad), bad)
        }
    }

    func testConfigErrorsNameTheirLines() throws {
        func errors(_ body: String) throws -> [String] {
            try configErrors("", plugins: ["gh.toml": ("provider = \"github\"\n" + body, 0o600)]).map(\.description)
        }
        let noRepo = try errors("token = \"tok-1\"\nwatch = \"releases\"\n")
        XCTAssertTrue(noRepo.first?.contains("'repo'") == true, "releases: repo is required: \(noRepo)")
        XCTAssertTrue(try errors("watch = \"releases\"\nrepo = \"o/r\"\n").isEmpty, "public releases need no token")
        XCTAssertTrue(try errors("watch = \"notifications\"\n").first?.contains("missing required secret 'token'") == true)
        let plain = try errors("token = \"tok-1\"\napi_url = \"http://ghe.corp.test/api/v3\"\n")
        XCTAssertTrue(plain.first?.contains("gh.toml:3:") == true && plain.first?.contains("loopback only") == true, "\(plain)")
        XCTAssertTrue(try errors("token = \"tok-1\"\napi_url = \"http://127.0.0.1:9/api/v3\"\n").isEmpty, "loopback may be plain http")
        let repo = try errors("watch = \"releases\"\nrepo = \"a/b/c\"\n")
        XCTAssertTrue(repo.first?.contains("gh.toml:3:") == true && repo.first?.contains("OWNER/NAME") == true, "\(repo)")
        let misplaced = try errors("token = \"tok-1\"\nrepo = \"a/b\"\n")
        XCTAssertTrue(misplaced.first?.contains("'repo' is an option of watch = \"releases\"") == true, "\(misplaced)")
        let participating = try errors("watch = \"releases\"\nrepo = \"a/b\"\nparticipating = true\n")
        XCTAssertTrue(participating.first?.contains("gh.toml:4:") == true, "\(participating)")
    }
}
