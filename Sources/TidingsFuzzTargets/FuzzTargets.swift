import Foundation
import TidingsApp
import TidingsCurl
import TidingsPluginAPI
import TidingsProviders
import TidingsSinks

/// What each fuzz target does with one input: the whole of what the fuzz package (Fuzz/, built
/// apart with the sanitizers) may call in tidings, so this is the one public API of the package.
/// Every function feeds the bytes to the same entry point production uses; thrown errors are expected answers to bad input, while traps,
/// sanitizer reports, hangs and runaway memory are bugs. Tests/TidingsAppTests/FuzzRegressionTests.swift
/// replays the saved crashers through the same calls.
public enum FuzzTargets {
    /// Name (as `make fuzz` and Fuzz/corpus/NAME use it) → what one input goes through.
    public static let all: [String: @Sendable (Data) -> Void] = [
        "config": config, "duration": duration, "sportdate": sportdate, "statuspage": statuspage,
        "economic": economic, "alertmanager": alertmanager, "http-json": httpJSON, "exec-output": execOutput,
        "feed": feed, "page": page, "urlwatch": urlwatch, "opml": opml,
    ]

    /// A urlwatch urls.yaml → `tidings import urlwatch`'s reader (libyaml, the YAML bounds, the
    /// job and filter mapping, page's selection check).
    static func urlwatch(_ data: Data) {
        _ = try? UrlwatchReader(fileName: "urls.yaml", checkSelection: PageProvider.selectionProblem).read([UInt8](data))
    }

    /// An OPML file → `tidings import opml`'s parser and reader, and what was read written back
    /// as `tidings export opml` writes it.
    static func opml(_ data: Data) {
        guard let outlines = try? OPML.outlines([UInt8](data)) else { return }
        _ = OPMLReader(fileName: "subs.opml").read(outlines.map { ($0.title, $0.xmlURL, $0.htmlURL, $0.folders, $0.line) })
        _ = OPML.document(outlines.compactMap { o in o.xmlURL.map { OPML.Feed(title: o.title, xmlURL: $0, htmlURL: o.htmlURL, group: o.folders.first) } })
    }

    /// The TOML text of a main config → ``ConfigLoader/load(text:file:)`` with every built-in
    /// provider and sink. The file name does not exist, so the default plugins.d is absent.
    /// Sinks are built with it, never sent through: config loading does no I/O.
    static let http = CurlHTTPClient()

    static func config(_ data: Data) {
        let loader = ConfigLoader(providers: BuiltinProviders.registry, sinks: BuiltinSinks.registry, http: http, mail: http)
        _ = try? loader.load(text: String(decoding: data, as: UTF8.self), file: "/nonexistent/tidings-fuzz/tidings.toml")
    }

    /// A duration string (config values like "1h30m"), and the same text as an HTTP `Retry-After`
    /// value; each result is formatted back the way log lines and error messages do.
    static func duration(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        if let s = try? DurationParser.seconds(text) { _ = DurationParser.format(s) }
        if let wait = HTTPResponse(status: 429, headers: ["retry-after": text], body: Data()).retryAfter {
            _ = DurationParser.format(wait.rounded(.up))
        }
    }

    /// A Sportdate `/api/message/check` body.
    static func sportdate(_ data: Data) {
        _ = try? SportdateProvider.decode(data, base: URL(string: "https://www.sportdate.se")!, email: "fuzz@example.com")
    }

    /// A Statuspage v2 `summary.json` body.
    static func statuspage(_ data: Data) {
        _ = try? StatuspageProvider.decode(data, host: "status.example.com")
    }

    /// An e-conomic `/invoices/drafts` page, and the same body as an error response.
    static func economic(_ data: Data) {
        _ = try? EconomicProvider.decodePage(data, page: 1, base: URL(string: "https://restapi.e-conomic.com")!)
        _ = EconomicProvider.error(HTTPResponse(status: 400, headers: [:], body: data), page: 2)
    }

    /// An Alertmanager `/api/v2/alerts` body.
    static func alertmanager(_ data: Data) {
        _ = try? AlertmanagerProvider.decode(data, now: Date(timeIntervalSince1970: 1_795_000_000))
    }

    /// Two http-json sources over the same body: items at `/data` with templated fields, and
    /// the whole document as the list with no fields set (keys from `_key` or a hash).
    static let httpJSONSources: [HTTPJSONProvider] = [
        HTTPJSONProvider(
            url: URL(string: "https://api.example.com/items")!, items: "/data", key: FieldTemplate("/id"),
            title: FieldTemplate("{/name} is {/status}"), body: FieldTemplate("/detail/text"),
            link: FieldTemplate("/links/0/href"), severity: FieldTemplate("/level")),
        HTTPJSONProvider(url: URL(string: "https://api.example.com/items")!),
    ]

    static func httpJSON(_ data: Data) {
        for p in httpJSONSources { _ = try? p.decode(data) }
    }

    /// An exec plugin's stdout, read as JSON lines and as Nagios output (exit status = first byte mod 4).
    static func execOutput(_ data: Data) {
        _ = try? ExecProvider.parseJSONLines(data)
        _ = ExecProvider.nagiosItem(status: Int32((data.first ?? 0) % 4), stdout: data, name: "fuzz")
    }

    /// A feed document (RSS, Atom, RDF or JSON Feed; libxml2 in recovery mode), read as the
    /// server's bytes and as declared windows-1252, with the default entry limit.
    static let feedSource = FeedProvider(url: URL(string: "https://blog.example.com/feed.xml")!)

    static func feed(_ data: Data) {
        _ = try? feedSource.decode(data)
        _ = try? feedSource.decode(data, charset: "windows-1252")
    }

    /// A web page (libxml2's HTML parser in recovery mode) through the page provider's decode:
    /// the whole document, CSS selections with `each` and a CSS key, and XPath selections with
    /// an XPath key, each rendered as the provider renders it (one per-document budget).
    static let pageSources: [PageProvider] = {
        let url = URL(string: "https://jobs.example.com/openings")!
        return [
            PageProvider(url: url),
            PageProvider(url: url, selection: .css(try! CSSSelector("div.job, ul > li:nth-child(2n+1)")), each: true, key: .css(try! CSSSelector("a[href]"))),
            PageProvider(url: url, selection: .xpath("//div[contains(@class, 'job')] | //tr[td]"), each: true, key: .xpath("string(.//a/@href)")),
            PageProvider(url: url, selection: .xpath("//*[contains(string(/), 'zz')]"), each: true, key: .attribute("id")),
        ]
    }()

    static func page(_ data: Data) {
        for p in pageSources { _ = try? p.decode(data, contentType: "text/html") }
        _ = try? pageSources[0].decode(data, contentType: "text/plain; charset=windows-1252")
    }
}
