import CLibXML2
import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// `provider = "page"`: a web page (or any text resource) watched for changes (DESIGN §12,
/// docs/providers/page.md).
///
/// ```toml
/// provider = "page"
/// url = "https://example.com/jobs"
/// select = "css:ul.jobs > li"        # or "xpath:EXPR"; default the whole document
/// each = true                        # every selected element is an item
/// key = "@data-id"                   # with each: "css:…" / "xpath:…" relative to the element, or "@attr"
/// ignore = ["^Updated at "]          # lines matching any are dropped before comparison (SafeRegex)
/// user_agent = "Mozilla/5.0 …"
/// ca_file = "/etc/ssl/private-ca.pem"
/// ```
/// HTML is parsed by libxml2's HTML parser in recovery mode (as browsers repair it), without
/// network access; the charset is the HTTP header's, else the page's `<meta charset>`, else
/// UTF-8. Other text types (text/plain, JSON…) are compared as text. Kind `page`: `title` the
/// first line, `body` the text, `data.text` the compared text; a `changed` event's body is a
/// unified diff of that text, with `data.added` / `data.removed` its lines.
package struct PageProvider: Provider, EventDescriber {
    package var url: URL
    /// `url` was given as a secret (`url_file` …): shown without its query.
    package var urlIsSecret = false
    var headers: HeaderTable
    var selection: Selection
    var each: Bool
    var key: Key?
    var ignore: [SafeRegex]
    var userAgent: String?
    var caFile: String?

    package enum Selection: Sendable, Equatable {
        case document
        case css(CSSSelector)
        case xpath(String)
    }

    package enum Key: Sendable, Equatable {
        case attribute(String)
        case css(CSSSelector)
        case xpath(String)
    }

    /// An item's title and body are cut to these many characters, its compared text (data.text) to `maxText`.
    static let maxTitle = 200
    static let maxBody = 4000
    static let maxText = 64 << 10
    /// With `each`, at most this many elements are items.
    static let maxItems = 10_000

    package init(
        url: URL, headers: HeaderTable = HeaderTable(), selection: Selection = .document, each: Bool = false, key: Key? = nil,
        ignore: [SafeRegex] = [], userAgent: String? = nil, caFile: String? = nil
    ) {
        self.url = url
        self.headers = headers
        self.selection = selection
        self.each = each
        self.key = key
        self.ignore = ignore
        self.userAgent = userAgent
        self.caFile = caFile
    }

    package var host: String? { url.host }

    package static let factory = ProviderFactory(name: "page", summary: "a web page or text resource, compared as text") { o, _, _ in
        let (url, urlIsSecret) = try o.requestURLOption("url")
        var selection = Selection.document
        if let raw = try o.string("select") {
            switch try PageProvider.parse(raw, option: "select", o) {
            case .css(let s): selection = .css(s)
            case .xpath(let x): selection = .xpath(x)
            case .attribute: throw o.error("select", "\(o.what): 'select' must start with \"css:\" or \"xpath:\", not \"\(raw)\"")
            }
        }
        let each = try o.bool("each") ?? false
        var key: Key?
        if let raw = try o.string("key") {
            guard each else { throw o.error("key", "\(o.what): 'key' names each selected element's identity: it needs each = true") }
            key = try PageProvider.parse(raw, option: "key", o)
        }
        let ignore = try ProviderSupport.patterns(o, "ignore")
        let userAgent = try o.string("user_agent")
        if let userAgent, userAgent.isEmpty || !HeaderTable.isValidValue(userAgent) {
            throw o.error("user_agent", "\(o.what): 'user_agent' must be one line of text, not empty")
        }
        var page = PageProvider(
            url: url, headers: try o.headers(), selection: selection, each: each, key: key, ignore: ignore,
            userAgent: userAgent, caFile: try ProviderSupport.caFile(o))
        page.urlIsSecret = urlIsSecret
        return page
    }

    /// `css:SELECTOR`, `xpath:EXPR` or (for `key`) `@attr`, checked: a bad one names where it goes wrong.
    static func parse(_ raw: String, option: String, _ o: OptionReader) throws -> Key {
        let forms = option == "key" ? "\"css:\", \"xpath:\" or \"@\"" : "\"css:\" or \"xpath:\""
        if raw.hasPrefix("css:") {
            do { return .css(try CSSSelector(String(raw.dropFirst(4)))) } catch {
                throw o.error(option, "\(o.what): '\(option)': invalid CSS selector \"\(raw.dropFirst(4))\": \(error)")
            }
        }
        if raw.hasPrefix("xpath:") {
            let expr = String(raw.dropFirst(6))
            if let problem = PageXPath.check(expr) {
                throw o.error(option, "\(o.what): '\(option)': invalid XPath \"\(expr)\": \(problem)")
            }
            return .xpath(expr)
        }
        if option == "key", raw.hasPrefix("@"), raw.count > 1 {
            return .attribute(String(raw.dropFirst()).lowercased())
        }
        throw o.error(option, "\(o.what): '\(option)' must start with \(forms), not \"\(raw)\"")
    }

    var credentials: Credentials { headers.carriesCredentials || url.user != nil || urlIsSecret ? .sent : .notSent }

    static let accept = "text/html, application/xhtml+xml, text/plain;q=0.9, */*;q=0.8"

    package func poll(_ ctx: PollContext) async throws -> PollResult {
        var hdrs: [(String, String)] = [("Accept", Self.accept)]
        if let userAgent { hdrs.append(("User-Agent", userAgent)) }
        hdrs += headers.pairs + ctx.validators.requestHeaders
        let response = try await ctx.send("GET", url, headers: hdrs, credentials: credentials, caFile: caFile)
        if response.status == 304 { return .notModified }
        guard (200..<300).contains(response.status) else {
            throw PollError.http(response, credentials: credentials, detail: PollError.excerpt(response.body))
        }
        let decoded = try decode(response.body, contentType: response.header("content-type"), maxBody: ctx.maxBody)
        for note in decoded.notes {
            Log.warnOnce("page \(ctx.source) \(note)", "the page at \(shownURL): \(note)", logger: ctx.logger)
        }
        return .snapshot(decoded.items, validators: Validators(from: response))
    }

    package struct Decoded {
        package var items: [Item]
        /// What was cut or guessed (logged as warnings, once).
        package var notes: [String] = []
    }

    /// A successful response body → items (pure: what `poll` does after the request). Reading
    /// it costs at most a ``DocumentBudget`` (from the body's size and `maxBody`) in all.
    package func decode(_ body: Data, contentType: String?, maxBody: Int = 10 << 20) throws -> Decoded {
        let type = contentType?.split(separator: ";").first.map { $0.trimmed(newlines: false).lowercased() } ?? ""
        let charset = FeedProvider.charset(ofContentType: contentType)
        var notes: [String] = []
        var texts: [(node: xmlNodePtr?, lines: [String], cut: Bool)] = []
        var document: PageDocument?
        defer { withExtendedLifetime(document) {} }  // the selected nodes live in it
        let budget = DocumentBudget.page(pageSize: body.count, maxBody: maxBody)
        if PageDocument.isMarkup(type: type, body: body) {
            let doc = try PageDocument(body, charset: charset)
            document = doc
            let selected: [PageXPath.Selected]
            switch selection {
            case .document:
                selected = [.node(doc.root)]
            case .css(let sel):
                var cut = false
                selected = sel.select(
                    under: doc.root, limit: Self.maxItems + 1, budget: RenderedText.maxVisits, maxDepth: RenderedText.maxDepth,
                    shared: budget, cut: &cut
                ).map { .node($0) }
                if cut { notes.append("the page is larger or nests deeper than tidings reads (\(RenderedText.maxDepth) levels): the selection stops there") }
            case .xpath(let expr):
                selected = try PageXPath.evaluate(expr, doc: doc.doc, node: doc.root, budget: budget)
            }
            if selected.count > Self.maxItems {
                notes.append("'select' matched \(selected.count) elements: only the first \(Self.maxItems) are read")
            }
            for s in selected.prefix(Self.maxItems) {
                if budget.spent { break }
                var r = RenderedText(budget: budget)
                switch s {
                case .node(let n): r.render(n)
                case .value(let v): r.plain(v)
                }
                texts.append((s.node, r.lines, r.cut))
            }
        } else {
            guard type.hasPrefix("text/") || type.contains("json") || type.contains("javascript") || type.isEmpty else {
                throw PollError(.transient, "not a text resource: Content-Type \(type)")
            }
            if selection != .document {
                throw PollError(.transient, "'select' needs an HTML page, and this is \(type.isEmpty ? "text" : type)")
            }
            var r = RenderedText(budget: budget)
            r.plain(PageDocument.decodeText(body, charset: charset))
            texts.append((nil, r.lines, r.cut))
        }
        try budget.check()
        if texts.contains(where: { $0.cut }) {
            notes.append(
                "its text is longer than tidings reads (\(RenderedText.maxBytes) bytes, \(RenderedText.maxDepth) levels deep): the rest is not compared")
        }
        if !each {
            if texts.isEmpty { throw PollError(.transient, "'select' matched nothing on the page") }
            let lines = filter(texts.flatMap { $0.lines })
            return Decoded(items: [item(key: "page", lines: lines)], notes: notes)
        }
        var items: [Item] = []
        var seen: Set<String> = []
        for t in texts {
            let lines = filter(t.lines)
            let given = t.node.flatMap { keyValue(of: $0, document: document, budget: budget) }
            if lines.isEmpty && given == nil { continue }
            let k = given ?? "text:" + Fingerprint.of(["page-element", lines.joined(separator: "\n")])
            guard seen.insert(k).inserted else { continue }  // the first of elements with one key
            items.append(item(key: k, lines: lines))
        }
        try budget.check()
        return Decoded(items: items, notes: notes)
    }

    /// Lines that match an `ignore` pattern dropped.
    func filter(_ lines: [String]) -> [String] {
        guard !ignore.isEmpty else { return lines }
        return lines.filter { line in !ignore.contains { $0.matches(in: line) } }
    }

    /// An element's `key`: its attribute, or the text of the first match under it (one line).
    func keyValue(of element: xmlNodePtr, document: PageDocument?, budget: DocumentBudget? = nil) -> String? {
        if budget?.spent == true { return nil }
        let found: PageXPath.Selected?
        switch key {
        case nil: return nil
        case .attribute(let name)?:
            found = HTMLTree.attribute(element, name).map { .value($0) }
        case .css(let sel)?:
            found = sel.first(under: element, shared: budget).map { .node($0) }
        case .xpath(let expr)?:
            guard let document else { return nil }
            found = (try? PageXPath.evaluate(expr, doc: document.doc, node: element, budget: budget))?.first
        }
        guard let found else { return nil }
        var r = RenderedText(budget: budget)
        switch found {
        case .node(let n): r.render(n)
        case .value(let v): r.plain(v)
        }
        let line = String(Redactor.shared.scrub(r.lines.joined(separator: " ")).prefix(500))  // scrubbed before the cut
        return line.isEmpty ? nil : line
    }

    func item(key: String, lines: [String]) -> Item {
        let text = lines.joined(separator: "\n")
        let title = lines.first.map { FeedText.cut($0, Self.maxTitle) } ?? "(empty)"
        return Item(
            key: key, kind: "page", title: title, body: FeedText.cut(text, Self.maxBody), url: shownURL,
            data: ["text": .string(FeedText.cut(text, Self.maxText))], fingerprint: Fingerprint.of(["page", text]))
    }

    /// The URL without a user name or password.
    var shownURL: String { ShownURL.of(url, query: !urlIsSecret) }

    // MARK: events

    /// A `changed` page: its body is a unified diff of the compared text, `data.added` and
    /// `data.removed` the lines (the whole old and new text are not repeated in `data.changes`).
    package func describe(_ event: inout Event, change: ItemChange, firstSeen: Date) {
        TextChange.describe(&event, change: change)
    }
}

/// A parsed HTML page (freed with this object).
final class PageDocument {
    let doc: xmlDocPtr
    /// The root element, or the document node of an empty page.
    var root: xmlNodePtr {
        tidings_xmlDocGetRootElement(doc) ?? UnsafeMutableRawPointer(doc).assumingMemoryBound(to: xmlNode.self)
    }

    /// libxml2's nesting limit without HTML_PARSE_HUGE.
    static let maxDepth = 256

    /// Recover as a browser does, never touch the network, say nothing; not HTML_PARSE_HUGE
    /// (libxml2's limits on depth and text sizes stay on).
    static let options =
        HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NONET.rawValue | HTML_PARSE_NOERROR.rawValue
        | HTML_PARSE_NOWARNING.rawValue

    /// Parses `body` in the charset of the HTTP header, else the page's `<meta charset>`, else
    /// UTF-8 (the header wins over the page, as in browsers).
    init(_ body: Data, charset: String?) throws {
        try XMLFeed.setUp()
        let declared = charset.map(Self.encodingName)
        let encoding = declared ?? Self.metaCharset(body).map(Self.encodingName) ?? "UTF-8"
        // The header's charset: the page's own meta cannot switch it.
        let options = Int32(bitPattern: Self.options | (declared != nil ? HTML_PARSE_IGNORE_ENC.rawValue : 0))
        guard body.count < Int32.max else { throw PollError(.transient, "page too large to parse") }
        tidings_xmlResetLastError()
        let parsed: xmlDocPtr? = body.withUnsafeBytes { raw in
            let chars = raw.bindMemory(to: CChar.self)
            // An empty page is an empty document (libxml2 reads nothing from zero bytes).
            let input = chars.isEmpty ? " " : nil
            if let input { return tidings_htmlReadMemory(input, 1, nil, encoding, options) }
            return tidings_htmlReadMemory(chars.baseAddress, Int32(chars.count), nil, encoding, options)
        }
        guard let parsed else { throw PollError(.transient, "the page could not be read as HTML") }
        // libxml2 stops at 256 levels of nesting (without HTML_PARSE_HUGE) and drops the rest
        // of the page: a clear failure, not a page that lost its text.
        if let e = tidings_xmlGetLastError(), e.pointee.domain == Int32(XML_FROM_PARSER.rawValue) || e.pointee.domain == Int32(XML_FROM_HTML.rawValue),
            let m = e.pointee.message, String(cString: m).hasPrefix("Excessive depth")
        {
            tidings_xmlFreeDoc(parsed)
            throw PollError(.transient, "the page nests elements more than \(Self.maxDepth) levels deep (libxml2's limit): it cannot be read")
        }
        doc = parsed
    }

    deinit { tidings_xmlFreeDoc(doc) }

    /// Whether a response is parsed as HTML: an HTML or XML type, or none and a body that starts with `<`.
    static func isMarkup(type: String, body: Data) -> Bool {
        if type.contains("html") || type.contains("xml") { return true }
        guard type.isEmpty else { return false }
        let first = body.prefix(1024).first { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }
        return first == UInt8(ascii: "<")
    }

    /// Charset labels as libxml2 (iconv) names them; the Latin-1 and ASCII labels mean
    /// windows-1252, as they do in browsers (WHATWG Encoding).
    static func encodingName(_ label: String) -> String {
        let l = label.trimming(scalarsIn: " \t\"'").lowercased()
        switch l {
        case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1", "ascii", "us-ascii", "cp1252", "x-cp1252",
            "windows-1252", "cp819", "ibm819":
            return "windows-1252"
        case "utf8", "unicode-1-1-utf-8", "utf-8":
            return "UTF-8"
        default:
            return l
        }
    }

    /// The charset a page declares in its first 1024 bytes: `<meta charset="…">` or
    /// `<meta http-equiv="Content-Type" content="text/html; charset=…">`.
    static func metaCharset(_ body: Data) -> String? {
        let head = String(decoding: body.prefix(1024), as: UTF8.self).lowercased()
        var rest = head[...]
        while let meta = rest.firstRange(of: "<meta") {
            let tagEnd = rest[meta.upperBound...].firstIndex(of: ">") ?? rest.endIndex
            let tag = rest[meta.upperBound..<tagEnd]
            if let c = tag.firstRange(of: "charset") {
                var value = tag[c.upperBound...].drop { $0 == " " }
                if value.first == "=" {
                    value = value.dropFirst().drop { $0 == " " || $0 == "\"" || $0 == "'" }
                    let name = value.prefix { !" \"';/>".contains($0) }
                    if !name.isEmpty { return String(name) }
                }
            }
            rest = rest[tagEnd...]
        }
        return nil
    }

    /// A text resource's body as text: UTF-8 (invalid bytes replaced) unless the header names
    /// windows-1252 (Latin-1) or UTF-16.
    static func decodeText(_ body: Data, charset: String?) -> String {
        switch charset.map(encodingName) {
        case "windows-1252"?: return String(data: body, encoding: .windowsCP1252) ?? String(decoding: body, as: UTF8.self)
        case "utf-16"?, "utf-16le"?, "utf-16be"?: return String(data: body, encoding: .utf16) ?? String(decoding: body, as: UTF8.self)
        default: return String(decoding: body, as: UTF8.self)
        }
    }
}

/// XPath 1.0 through libxml2: checked at config load, evaluated with a bound on its operations.
enum PageXPath {
    enum Selected {
        case node(xmlNodePtr)
        case value(String)
        var node: xmlNodePtr? { if case .node(let n) = self { return n } else { return nil } }
    }

    /// libxml2 stops an evaluation after this many operations (a costly expression on a large
    /// page), and all evaluations on a page together (``DocumentBudget``: the keys too).
    static let maxOperations: UInt = 20_000_000

    /// What is wrong with `expr` (libxml2's message and where), or nil if it compiles.
    static func check(_ expr: String) -> String? {
        do { try XMLFeed.setUp() } catch { return "it cannot be checked: \(error)" }
        guard !expr.trimmed(newlines: false).isEmpty else { return "empty expression" }
        tidings_xmlResetLastError()
        let compiled = expr.withCString { tidings_xmlXPathCompile(UnsafeRawPointer($0).assumingMemoryBound(to: xmlChar.self)) }
        if let compiled {
            tidings_xmlXPathFreeCompExpr(compiled)
            return nil
        }
        return lastError(expr)
    }

    static func operationLimit(_ expr: String) -> PollError {
        PollError(
            .transient,
            "XPath \"\(expr)\" took more than \(maxOperations) operations on this page (tidings' limit for all evaluations on a page, keys included)")
    }

    static func lastError(_ expr: String) -> String {
        guard let e = tidings_xmlGetLastError(), e.pointee.domain == Int32(XML_FROM_XPATH.rawValue) else { return "not a valid XPath 1.0 expression" }
        let message = e.pointee.message.map { String(cString: $0).trimmed() } ?? "invalid"
        // int1: the byte offset where libxml2 stopped.
        let offset = Int(e.pointee.int1)
        let at = String(decoding: expr.utf8.prefix(max(offset, 0)), as: UTF8.self).count + 1
        return "\(message) at character \(at)"
    }

    /// The nodes (or the string, number or boolean) `expr` gives with `node` as the context.
    /// Its operations count against `budget` (the page's); the poll's ``WorkStop`` ends it.
    /// libxml2 counts an operation, not its cost (`string(/)` is one, and reads the page), so
    /// the poll's timeout is what bounds such an expression: it stops within one operation.
    static func evaluate(_ expr: String, doc: xmlDocPtr, node: xmlNodePtr, budget: DocumentBudget? = nil) throws -> [Selected] {
        try XMLFeed.setUp()
        guard let ctx = tidings_xmlXPathNewContext(doc) else { throw PollError(.transient, "libxml2: out of memory") }
        defer { tidings_xmlXPathFreeContext(ctx) }
        let limit = budget?.operationsLeft ?? maxOperations
        guard limit > 0 else {
            budget?.ranOutOfOperations()
            throw operationLimit(expr)
        }
        ctx.pointee.opLimit = limit
        ctx.pointee.node = node
        tidings_xmlResetLastError()
        let address = UInt(bitPattern: ctx)
        let stop = WorkStop.current ?? WorkStop()
        let result = stop.whileRunning(onStop: { tidings_xpath_stop(UnsafeMutablePointer(bitPattern: address)) }) {
            expr.withCString { tidings_xmlXPathEvalExpression(UnsafeRawPointer($0).assumingMemoryBound(to: xmlChar.self), ctx) }
        }
        budget?.add(operations: min(ctx.pointee.opCount, limit))
        guard let result else {
            if stop.isStopped { throw PollError(.transient, "stopped evaluating XPath \"\(expr)\": the poll ran out of time") }
            if ctx.pointee.opCount >= limit {
                budget?.ranOutOfOperations()
                throw operationLimit(expr)
            }
            throw PollError(.transient, "XPath \"\(expr)\" could not be evaluated on this page: \(lastError(expr))")
        }
        defer { tidings_xmlXPathFreeObject(result) }
        switch result.pointee.type {
        case XPATH_NODESET:
            guard let set = result.pointee.nodesetval, set.pointee.nodeNr > 0, let tab = set.pointee.nodeTab else { return [] }
            return (0..<Int(set.pointee.nodeNr)).compactMap { tab[$0].map { .node($0) } }
        case XPATH_STRING:
            return [.value(result.pointee.stringval.map { String(cString: $0) } ?? "")]
        case XPATH_NUMBER:
            let v = result.pointee.floatval
            return [.value(v.isFinite && v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : String(v))]
        case XPATH_BOOLEAN:
            return [.value(result.pointee.boolval != 0 ? "true" : "false")]
        default:
            return []
        }
    }
}
