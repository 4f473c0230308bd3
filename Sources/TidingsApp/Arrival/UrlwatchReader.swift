import FoundationEssentials
import TidingsPluginAPI
import TidingsYAML

/// `tidings import urlwatch FILE`: urlwatch 2.x's `urls.yaml` (one job per YAML document) as
/// drafts (docs/coming-from-urlwatch.md has the whole mapping).
///
/// - `url` jobs become `page` sources: the selecting filter (`css`, `xpath`, `element-by-id`,
///   `-class`, `-tag`, `-style`) is `select`; `grepi` and a `re.sub` that deletes are `ignore`
///   patterns; `html2text`, `strip`, `striplines` and `beautify` are what `page` does anyway.
/// - `shell` (`command`) jobs become `exec` sources with `format = "text"`, run by `/bin/sh -c`.
/// - `browser` (`navigate`) jobs, and jobs with a filter or key that has no equivalent, are
///   not importable, with the reason and line: never imported half.
package struct UrlwatchReader: Sendable {
    /// Checks a `select` value (`css:…`, `xpath:…`) as the page provider will: the problem, or nil.
    package typealias SelectionCheck = @Sendable (String) -> String?

    /// urlwatch runs from cron, most often daily: the interval of every imported source.
    package var interval: String
    package var checkSelection: SelectionCheck
    /// The file's name, for the comment at the head of each source.
    package var fileName: String

    package static let defaultInterval = "1d"

    package init(fileName: String, interval: String = UrlwatchReader.defaultInterval, checkSelection: @escaping SelectionCheck = { _ in nil }) {
        self.fileName = fileName
        self.interval = interval
        self.checkSelection = checkSelection
    }

    /// Every job of `text`; a YAML error (the file cannot be read whole) is thrown, with its line.
    package func read(_ text: [UInt8]) throws(YAMLError) -> ImportReading {
        var reading = ImportReading()
        for doc in try YAML.documents(text) {
            if doc.isNull { continue }
            switch job(doc) {
            case .success(let draft): reading.drafts.append(draft)
            case .failure(let refusal): reading.notImportable.append(refusal)
            }
        }
        return reading
    }

    // MARK: jobs

    struct Refusal: Error {
        var reason: String
        var line: Int?
    }

    static let commonKeys: Set<String> = [
        "kind", "name", "filter", "max_tries", "diff_tool", "compared_versions", "diff_filter", "enabled", "treat_new_as_changed",
        "user_visible_url", "tags",
    ]
    static let urlKeys: Set<String> = [
        "url", "cookies", "data", "method", "ssl_no_verify", "ignore_cached", "http_proxy", "https_proxy", "headers",
        "ignore_connection_errors", "ignore_http_error_codes", "encoding", "timeout", "ignore_timeout_errors",
        "ignore_too_many_redirects", "ignore_incomplete_reads",
    ]
    static let shellKeys: Set<String> = ["command", "stderr"]

    enum Outcome {
        case success(SourceDraft)
        case failure(NotImportable)
    }

    func job(_ doc: YAMLNode) -> Outcome {
        guard let pairs = doc.mapping else {
            return .failure(NotImportable(what: "document at line \(doc.line)", line: doc.line, reason: "not a job (a job is a mapping of keys)"))
        }
        let what = doc["name"]?.string ?? doc["url"]?.string ?? doc["command"]?.string ?? doc["navigate"]?.string ?? "job"
        do {
            return .success(try draft(doc, pairs: pairs))
        } catch {
            return .failure(NotImportable(what: what, line: error.line ?? doc.line, reason: error.reason))
        }
    }

    func draft(_ doc: YAMLNode, pairs: [YAMLPair]) throws(Refusal) -> SourceDraft {
        let keys = pairs.compactMap(\.key.string)
        let kind: String
        if let k = doc["kind"]?.string {
            kind = k
        } else if keys.contains("navigate") {
            kind = "browser"
        } else if keys.contains("command") {
            kind = "shell"
        } else if keys.contains("url") {
            kind = "url"
        } else {
            throw Refusal(reason: "no url, command or navigate: not a urlwatch job")
        }
        let own: Set<String>
        switch kind {
        case "url": own = Self.urlKeys
        case "shell": own = Self.shellKeys
        case "browser":
            throw Refusal(
                reason: "a browser job (navigate) runs the page's JavaScript in Chromium; tidings reads the HTML the server sends "
                    + "(watch the JSON behind the page with http-json, or the URL with page if its HTML has the text)")
        default: throw Refusal(reason: "kind \"\(kind)\" is not a urlwatch 2.29 job kind (url, shell, browser)")
        }
        for p in pairs {
            guard let k = p.key.string, Self.commonKeys.contains(k) || own.contains(k) else {
                throw Refusal(reason: "key '\(p.key.string ?? "?")' is not a key of urlwatch's \(kind) jobs", line: p.key.line)
            }
        }
        var j = JobDraft(doc: doc, reader: self)
        try j.commonKeys()
        if kind == "url" { try j.url() } else { try j.shell() }
        return j.finish()
    }

    /// One job on its way to a draft.
    struct JobDraft {
        let doc: YAMLNode
        let reader: UrlwatchReader
        var draft = SourceDraft(name: "", provider: "page")
        var tail: [SourceOption] = []
        var notes: [String] = []

        init(doc: YAMLNode, reader: UrlwatchReader) {
            self.doc = doc
            self.reader = reader
        }

        func string(_ key: String) throws(Refusal) -> String? {
            guard let n = doc[key], !n.isNull else { return nil }
            guard let s = n.string else { throw Refusal(reason: "'\(key)' must be a string", line: n.line) }
            return s
        }

        func isTrue(_ key: String) -> Bool { doc[key]?.bool == true }

        /// Keys of every job kind.
        mutating func commonKeys() throws(Refusal) {
            if let n = doc["max_tries"], !n.isNull {
                guard let tries = n.int, tries >= 1 else { throw Refusal(reason: "'max_tries' must be a positive number", line: n.line) }
                tail.append(SourceOption("error_threshold", .integer(tries), comment: "urlwatch's max_tries: failures in a row before one error event"))
            }
            if doc["enabled"]?.bool == false {
                tail.append(SourceOption("enabled", .boolean(false), comment: "disabled in urlwatch (enabled: false)"))
            }
            let dropped: [(String, String)] = [
                ("diff_tool", "tidings shows a unified diff"),
                ("compared_versions", "tidings compares with the last version"),
                ("diff_filter", "the whole diff is shown"),
                ("treat_new_as_changed", "the first poll is a silent baseline"),
                ("user_visible_url", "the source's url is shown"),
                ("tags", "route by source name instead"),
            ]
            for (key, why) in dropped where doc[key].map({ !$0.isNull }) == true {
                notes.append("urlwatch's '\(key)' is not kept: \(why).")
            }
        }

        mutating func url() throws(Refusal) {
            guard let url = try string("url") else { throw Refusal(reason: "'url' is empty") }
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
                throw Refusal(reason: "\(url.prefix { $0 != ":" }) addresses are not watched by page (http and https only)", line: doc["url"]?.line)
            }
            if let n = doc["data"], !n.isNull {
                throw Refusal(reason: "'data' sends a request body (POST); page sources make GET requests", line: n.line)
            }
            if let m = try string("method"), m.uppercased() != "GET" {
                throw Refusal(reason: "'method: \(m)': page sources make GET requests", line: doc["method"]?.line)
            }
            if isTrue("ssl_no_verify") {
                throw Refusal(
                    reason: "'ssl_no_verify' turns certificate checks off; tidings always checks (give ca_file for a private CA)",
                    line: doc["ssl_no_verify"]?.line)
            }
            for key in ["http_proxy", "https_proxy"] where (try? string(key)) != nil {
                throw Refusal(reason: "'\(key)' per job: tidings uses the proxy of its environment (http_proxy, https_proxy) for every source", line: doc[key]?.line)
            }
            if let n = doc["cookies"], !n.isNull {
                throw Refusal(reason: "'cookies' are credentials, never written inline: add the source with a Cookie_file header (docs/providers/page.md)", line: n.line)
            }
            draft.provider = "page"
            draft.name = (try string("name")) ?? url
            draft.setURL(url)
            try filters(page: true)
            var headers: [(String, String)] = []
            var userAgent: String?
            if let n = doc["headers"], !n.isNull {
                guard let pairs = n.mapping else { throw Refusal(reason: "'headers' must be a mapping", line: n.line) }
                for p in pairs {
                    guard let name = p.key.string, let value = p.value.string, HeaderTable.isValidName(name), HeaderTable.isValidValue(value) else {
                        throw Refusal(reason: "header '\(p.key.string ?? "?")' is not a valid header line", line: p.key.line)
                    }
                    if HeaderTable.isCredentialLike(name) {
                        throw Refusal(
                            reason: "header '\(name)' carries a credential, never written inline: add it as headers.\(name)_file after importing",
                            line: p.key.line)
                    }
                    if name.lowercased() == "user-agent" { userAgent = value } else { headers.append((name, value)) }
                }
            }
            if !headers.isEmpty { draft.options.append(SourceOption("headers", .table(headers))) }
            if let userAgent { draft.options.append(SourceOption("user_agent", .string(userAgent))) }
            if let n = doc["timeout"], !n.isNull {
                guard let seconds = n.int, seconds >= 0 else { throw Refusal(reason: "'timeout' must be a number of seconds", line: n.line) }
                if seconds > 0 { tail.append(SourceOption("timeout", .string("\(seconds)s"))) }
            }
            let dropped: [(String, String)] = [
                ("ignore_cached", "tidings sends If-None-Match / If-Modified-Since and takes a 304 as no change"),
                ("encoding", "the charset is the response's, else the page's <meta charset>"),
                ("ignore_connection_errors", "failures are events after error_threshold"),
                ("ignore_http_error_codes", "failures are events after error_threshold"),
                ("ignore_timeout_errors", "failures are events after error_threshold"),
                ("ignore_too_many_redirects", "failures are events after error_threshold"),
                ("ignore_incomplete_reads", "failures are events after error_threshold"),
            ]
            for (key, why) in dropped where doc[key].map({ !$0.isNull && $0.bool != false }) == true {
                notes.append("urlwatch's '\(key)' is not kept: \(why).")
            }
        }

        mutating func shell() throws(Refusal) {
            guard var command = try string("command"), !command.isEmpty else { throw Refusal(reason: "'command' is empty") }
            switch try string("stderr") ?? "ignore" {
            case "ignore", "urlwatch": break
            case "stdout": command = "exec 2>&1\n" + command
            case "fail":
                throw Refusal(
                    reason: "'stderr: fail' fails on any stderr output; an exec source fails on a non-zero exit only", line: doc["stderr"]?.line)
            case let other: throw Refusal(reason: "'stderr: \(other)' is not one of ignore, urlwatch, stdout, fail", line: doc["stderr"]?.line)
            }
            draft.provider = "exec"
            draft.name = (try string("name")) ?? command
            draft.options.append(SourceOption("command", .strings(["/bin/sh", "-c", command])))
            draft.options.append(SourceOption("format", .string("text"), comment: "The whole output is compared; a change is a diff."))
            notes.append("It runs in plugins_dir (urlwatch ran it where urlwatch was started).")
            try filters(page: false)
        }

        /// urlwatch's filter list, as its `normalize_filter_list` reads it, onto `select` and `ignore`.
        mutating func filters(page: Bool) throws(Refusal) {
            guard let spec = doc["filter"], !spec.isNull else { return }
            var selection: String?
            var ignore: [String] = []
            var text = false
            for f in try Self.normalise(spec) {
                func refuse(_ why: String) -> Refusal { Refusal(reason: "filter \(f.kind): \(why)", line: f.line) }
                func sub(_ key: String) -> String? { f.sub.first { $0.key.string == key }?.value.string }
                let known = UrlwatchFilters.all[f.kind]
                guard let known else { throw refuse("not a urlwatch 2.29 filter") }
                if !page && f.kind != "strip" {
                    throw refuse("a command's output is compared whole: filter it in the command itself")
                }
                if let allowed = known.subfilters {
                    for p in f.sub where !(p.key.string.map(allowed.contains) ?? false) {
                        throw refuse("urlwatch does not know its subfilter '\(p.key.string ?? "?")'")
                    }
                }
                switch known.mapping {
                case .absorbed:
                    if f.kind == "html2text" {
                        if let method = sub("method"), !["re", "html2text", "bs4", "pyhtml2text", "lynx", "strip_tags"].contains(method) {
                            throw refuse("method '\(method)' is not an html2text method")
                        }
                        text = true
                    }
                case .selects(let make):
                    if selection != nil { throw refuse("a second selection; tidings selects once (one css or xpath expression)") }
                    if text { throw refuse("selects in the text html2text made; put the selection first") }
                    if let method = sub("method"), method != "html" {
                        throw refuse("method '\(method)': tidings parses pages as HTML")
                    }
                    for key in ["exclude", "namespaces"] where sub(key) != nil || f.sub.contains(where: { $0.key.string == key }) {
                        throw refuse("'\(key)' has no equivalent (select what to keep, or ignore its lines)")
                    }
                    for key in ["skip", "maxitems"] where (f.sub.first { $0.key.string == key }?.value.int ?? 0) != 0 {
                        throw refuse("'\(key)' has no equivalent: select the elements themselves (:nth-child)")
                    }
                    if f.sub.first(where: { $0.key.string == "sort" })?.value.bool == true {
                        throw refuse("'sort' has no equivalent")
                    }
                    guard let arg = sub(known.defaultKey ?? ""), !arg.isEmpty else { throw refuse("needs its \(known.defaultKey ?? "argument")") }
                    let select = make(arg)
                    if let problem = reader.checkSelection(select) { throw refuse("\(select): \(problem)") }
                    selection = select
                case .ignoresLines:
                    guard let pattern = sub(f.kind == "re.sub" ? "pattern" : "re"), !pattern.isEmpty else {
                        throw refuse("needs a regular expression")
                    }
                    if f.kind == "re.sub", let repl = sub("repl"), !repl.isEmpty {
                        throw refuse("replaces text with '\(repl)'; tidings can only leave out whole lines (ignore)")
                    }
                    do { _ = try SafeRegex(pattern, longestInput: SafeRegex.maxInputScalars) } catch { throw refuse("the pattern \(pattern) is not one tidings reads: \(error)") }
                    if f.kind == "re.sub" { notes.append("re.sub \(pattern): lines holding a match are ignored whole.") }
                    ignore.append(pattern)
                case .refused(let why):
                    throw refuse(why)
                }
            }
            if let selection { draft.options.append(SourceOption("select", .string(selection))) }
            if !ignore.isEmpty {
                draft.options.append(SourceOption("ignore", .strings(ignore), comment: "Lines matching any of these are not compared."))
            }
            if page, !text, selection != nil {
                notes.append("urlwatch compared the selection's markup; tidings compares its text (a change of attributes only is no event).")
            }
        }

        struct Filter {
            var kind: String
            var sub: [YAMLPair]
            var line: Int
        }

        /// `"css:ul > li,html2text"` or `[{css: …}, html2text, {grep: {re: …}}]` as (kind, subfilters).
        static func normalise(_ spec: YAMLNode) throws(Refusal) -> [Filter] {
            if let s = spec.string {
                return s.split(separator: ",", omittingEmptySubsequences: false).map { part in
                    guard let colon = part.firstIndex(of: ":") else { return Filter(kind: String(part), sub: [], line: spec.line) }
                    let kind = String(part[..<colon])
                    let arg = String(part[part.index(after: colon)...])
                    let key = UrlwatchFilters.all[kind]?.defaultKey ?? ""
                    return Filter(kind: kind, sub: [YAMLPair(key: YAMLNode(.scalar(key, plain: true), line: spec.line), value: YAMLNode(.scalar(arg, plain: false), line: spec.line))], line: spec.line)
                }
            }
            guard let items = spec.sequence else { throw Refusal(reason: "'filter' must be a string or a list", line: spec.line) }
            var out: [Filter] = []
            for item in items {
                if let kind = item.string {
                    out.append(Filter(kind: kind, sub: [], line: item.line))
                    continue
                }
                guard let pair = item.mapping?.first, let kind = pair.key.string else {
                    throw Refusal(reason: "a filter must be a name or a mapping of one name", line: item.line)
                }
                if let sub = pair.value.mapping {
                    out.append(Filter(kind: kind, sub: sub, line: item.line))
                } else if pair.value.isNull {
                    out.append(Filter(kind: kind, sub: [], line: item.line))
                } else {
                    let key = UrlwatchFilters.all[kind]?.defaultKey ?? ""
                    out.append(Filter(kind: kind, sub: [YAMLPair(key: YAMLNode(.scalar(key, plain: true), line: item.line), value: pair.value)], line: item.line))
                }
            }
            return out
        }

        func finish() -> SourceDraft {
            var d = draft
            let name = doc["name"]?.string
            d.comments.append("Imported from urlwatch (\(reader.fileName), line \(doc.line)\(name.map { ", job \"\($0)\"" } ?? "")).")
            d.comments += notes
            let why = reader.interval == UrlwatchReader.defaultInterval ? "urlwatch ran from cron, most often daily." : "Time between polls."
            d.options.append(SourceOption("interval", .string(reader.interval), comment: why))
            d.options += tail
            return d
        }
    }
}

/// urlwatch 2.29's filters (lib/urlwatch/filters.py): the subfilter a bare argument fills, the
/// subfilters it accepts, and what it becomes here.
package enum UrlwatchFilters {
    package enum Mapping: Sendable {
        /// What `page` does anyway (renders HTML to text, trims whitespace).
        case absorbed
        /// The selection, `css:…` or `xpath:…`, made from the argument.
        case selects(@Sendable (String) -> String)
        /// Lines matching the pattern are left out (`ignore`).
        case ignoresLines
        case refused(String)
    }

    package struct Filter: Sendable {
        package var defaultKey: String?
        package var subfilters: Set<String>?
        package var mapping: Mapping
    }

    /// urlwatch's element-by-* compare the whole attribute: `[class="a b"]`, not `.a.b`.
    static func attribute(_ name: String, _ value: String) -> String {
        "[\(name)=\"" + value.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\"]"
    }

    static let lxml: Set<String> = ["method", "exclude", "namespaces", "skip", "maxitems", "sort"]
    static let rewrites = "rewrites the text; tidings compares the text as the page renders it (lines can only be ignored)"
    static let notHTML = "turns a non-HTML document into text; page reads HTML and text"

    package static let all: [String: Filter] = [
        "css": Filter(defaultKey: "selector", subfilters: lxml.union(["selector"]), mapping: .selects { "css:" + $0 }),
        "xpath": Filter(defaultKey: "path", subfilters: lxml.union(["path"]), mapping: .selects { "xpath:" + $0 }),
        "element-by-id": Filter(defaultKey: "id", subfilters: ["id"], mapping: .selects { "css:" + attribute("id", $0) }),
        "element-by-class": Filter(defaultKey: "class", subfilters: ["class"], mapping: .selects { "css:" + attribute("class", $0) }),
        "element-by-tag": Filter(defaultKey: "tag", subfilters: ["tag"], mapping: .selects { "css:" + $0 }),
        "element-by-style": Filter(
            defaultKey: "style", subfilters: ["style"],
            mapping: .selects { "css:" + attribute("style", $0) }),
        "html2text": Filter(defaultKey: "method", subfilters: nil, mapping: .absorbed),
        "strip": Filter(defaultKey: nil, subfilters: [], mapping: .absorbed),
        "striplines": Filter(defaultKey: nil, subfilters: [], mapping: .absorbed),
        "beautify": Filter(defaultKey: nil, subfilters: [], mapping: .absorbed),
        "grepi": Filter(defaultKey: "re", subfilters: ["re"], mapping: .ignoresLines),
        "re.sub": Filter(defaultKey: "pattern", subfilters: ["pattern", "repl"], mapping: .ignoresLines),
        "grep": Filter(defaultKey: "re", subfilters: ["re"], mapping: .refused("keeps only matching lines; tidings can only leave lines out (ignore), or select the element that holds them")),
        "re.findall": Filter(defaultKey: "pattern", subfilters: ["pattern", "repl"], mapping: .refused(rewrites)),
        "sort": Filter(defaultKey: "separator", subfilters: ["separator", "reverse"], mapping: .refused(rewrites)),
        "reverse": Filter(defaultKey: "separator", subfilters: ["separator"], mapping: .refused(rewrites)),
        "remove-duplicate-lines": Filter(defaultKey: "separator", subfilters: ["separator"], mapping: .refused(rewrites)),
        "format-json": Filter(defaultKey: "indentation", subfilters: ["indentation", "sort_keys"], mapping: .refused("re-indents JSON before comparing; watch JSON with http-json")),
        "pretty-xml": Filter(defaultKey: "indentation", subfilters: ["indentation"], mapping: .refused("re-indents XML before comparing; watch a feed with feed")),
        "jq": Filter(defaultKey: "query", subfilters: ["query"], mapping: .refused("a jq query: watch JSON with http-json (items_path)")),
        "shellpipe": Filter(defaultKey: "command", subfilters: ["command"], mapping: .refused("pipes through a shell command: use an exec source with format = \"text\" that fetches and filters")),
        "sha1sum": Filter(defaultKey: nil, subfilters: [], mapping: .refused("compares a checksum; tidings compares the text (drop the filter to watch the text)")),
        "hexdump": Filter(defaultKey: nil, subfilters: [], mapping: .refused("compares binary content; page reads HTML and text")),
        "pdf2text": Filter(defaultKey: nil, subfilters: ["password", "raw", "physical"], mapping: .refused(notHTML)),
        "ical2text": Filter(defaultKey: nil, subfilters: [], mapping: .refused(notHTML)),
        "csv2text": Filter(defaultKey: "format_message", subfilters: ["format_message", "ignore_header", "has_header"], mapping: .refused(notHTML)),
        "ocr": Filter(defaultKey: nil, subfilters: ["language", "timeout"], mapping: .refused("reads text in an image (tesseract); page reads HTML and text")),
    ]
}
