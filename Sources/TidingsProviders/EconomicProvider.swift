import FoundationEssentials
import Logging
import Synchronization
import TidingsPOSIX
import TidingsPluginAPI

/// e-conomic draft invoices (README.md, section "economic"): `GET /invoices/drafts`, every page,
/// with the `X-AppSecretToken` and `X-AgreementGrantToken` headers.
///
/// The whole listing is one snapshot: if any page fails the poll fails and state is untouched.
/// Kind `draft-invoice`, key = `draftInvoiceNumber`; a draft that disappears was booked or deleted.
package final class EconomicProvider: Provider, EventDescriber, Sendable {
    /// e-conomic's fair-use budget: calls per agreement per 24 hours.
    package static let dailyBudget = 50_000

    /// `provider = "economic"`.
    package static let factory = ProviderFactory(
        name: "economic", summary: "e-conomic draft invoices (new, changed, booked or deleted)"
    ) { options, setup, warn in
        let base = try ProviderSupport.baseURL(options, default: "https://restapi.e-conomic.com")
        guard let app = try options.secret("app_secret_token", required: true),
            let grant = try options.secret("agreement_grant_token", required: true)
        else { throw options.error(nil, "\(options.what): missing tokens") }
        let pageSize = try options.int("page_size", range: 1...1000) ?? 1000
        let perDay = EconomicProvider.callsPerDay(interval: setup.interval, pages: 1)
        if perDay > Double(EconomicProvider.dailyBudget) {
            warn(
                "source \"\(setup.sourceName)\": polling every \(DurationParser.format(setup.interval)) makes \(Int(perDay)) e-conomic calls a day even with one page, over the fair-use budget of \(EconomicProvider.dailyBudget) per agreement; use a longer interval"
            )
        }
        return EconomicProvider(base: base, appSecret: app, grant: grant, pageSize: pageSize, interval: setup.interval)
    }

    let base: URL
    let appSecret: Secret
    let grant: Secret
    let pageSize: Int
    let interval: TimeInterval
    /// The page count last warned about, so the budget warning is logged once per change.
    private let warnedPages = Mutex<Int>(0)

    init(base: URL, appSecret: Secret, grant: Secret, pageSize: Int, interval: TimeInterval) {
        self.base = base
        self.appSecret = appSecret
        self.grant = grant
        self.pageSize = pageSize
        self.interval = interval
    }

    package var host: String? { base.host }

    static func callsPerDay(interval: TimeInterval, pages: Int) -> Double { 86_400 / max(interval, 1) * Double(pages) }

    var headers: [(String, String)] {
        [
            ("X-AppSecretToken", appSecret.value), ("X-AgreementGrantToken", grant.value),
            ("Content-Type", "application/json"), ("Accept", "application/json"),
        ]
    }

    package func poll(_ context: PollContext) async throws -> PollResult {
        var next: URL? = ProviderSupport.join(
            base, "/invoices/drafts",
            query: [
                URLQueryItem(name: "skippages", value: "0"), URLQueryItem(name: "pagesize", value: String(pageSize)),
            ])
        var visited = Set<String>()
        var drafts: [Item] = []
        while let url = next {
            guard visited.insert(url.absoluteString).inserted, visited.count <= 10_000 else {
                throw PollError(.transient, "e-conomic pagination loops at \(url.absoluteString)")
            }
            let response = try await context.send("GET", url, headers: headers, credentials: .sent)
            guard ProviderSupport.isSuccess(response) else { throw Self.error(response, page: visited.count) }
            let page = try Self.decodePage(response.body, page: visited.count, base: base)
            drafts += page.items
            next = page.next
        }
        warnIfOverBudget(pages: visited.count, context: context)
        return .snapshot(drafts)
    }

    /// One page's body → its drafts and the next page's URL, if any (pure: what `poll` does
    /// after each request; fuzzed by `make fuzz`). `page` is 1-based, for error messages.
    package static func decodePage(_ body: Data, page: Int, base: URL) throws -> (items: [Item], next: URL?) {
        let json = try ProviderSupport.json(body, what: "e-conomic draft invoices, page \(page)")
        guard let collection = json["collection"]?.arrayValue else {
            throw PollError(.transient, "e-conomic draft invoices, page \(page): no 'collection' list (body: \(PollError.excerpt(body)))")
        }
        return (collection.compactMap(Draft.init(json:)).map(\.item), try nextPage(json, base: base))
    }

    /// `pagination.nextPage`, which must stay on the configured host (the tokens go with it).
    func nextPage(_ json: JSONValue) throws -> URL? { try Self.nextPage(json, base: base) }

    static func nextPage(_ json: JSONValue, base: URL) throws -> URL? {
        guard let raw = json["pagination"]?["nextPage"]?.stringValue, !raw.isEmpty else { return nil }
        guard let url = URL(string: raw, relativeTo: base)?.absoluteURL else {
            throw PollError(.transient, "e-conomic nextPage is not a URL: \(raw)")
        }
        func port(_ u: URL) -> Int? { u.port ?? (u.scheme?.lowercased() == "https" ? 443 : u.scheme?.lowercased() == "http" ? 80 : nil) }
        guard url.scheme?.lowercased() == base.scheme?.lowercased(), url.host?.lowercased() == base.host?.lowercased(), port(url) == port(base) else {
            throw PollError(.transient, "e-conomic nextPage points to another host (\(url.host ?? "?")); refusing to send the tokens there")
        }
        return url
    }

    func warnIfOverBudget(pages: Int, context: PollContext) {
        let perDay = EconomicProvider.callsPerDay(interval: interval, pages: pages)
        guard perDay > Double(Self.dailyBudget) else { return }
        let first = warnedPages.withLock { old -> Bool in
            defer { old = pages }
            return old != pages
        }
        if first {
            context.logger.warning(
                "\(context.source): \(pages) pages every \(DurationParser.format(interval)) is \(Int(perDay)) e-conomic calls a day, over the fair-use budget of \(Self.dailyBudget); use a longer interval"
            )
        }
    }

    /// An error response: e-conomic's `message`, `errorCode` and `logId` (support asks for the logId).
    package static func error(_ response: HTTPResponse, page: Int) -> PollError {
        let json = try? JSONValue.parse(response.body)
        var parts: [String] = []
        if let m = json?["message"]?.stringValue { parts.append(m) }
        if let c = json?["errorCode"]?.stringValue { parts.append("errorCode \(c)") }
        if let l = json?["logId"]?.stringValue { parts.append("logId \(l)") }
        if let h = json?["developerHint"]?.stringValue, !h.isEmpty { parts.append("hint: \(h)") }
        if parts.isEmpty { parts.append(PollError.excerpt(response.body)) }
        var detail = "e-conomic: " + parts.joined(separator: "; ")
        if page > 1 { detail += " (page \(page))" }
        if [401, 403].contains(response.status), !detail.lowercased().contains("revoked") {
            detail += " (check the tokens; the agreement grant may have been revoked)"
        }
        if let wait = response.retryAfter, [429, 503].contains(response.status) { detail += "; retry after \(DurationParser.format(wait.rounded(.up)))" }
        return PollError.http(response, credentials: .sent, detail: detail)
    }

    // MARK: describing

    package func describe(_ event: inout Event, change: ItemChange, firstSeen: Date) {
        let number = event.key
        switch change.type {
        case .changed:
            guard let prev = change.previous, let old = Draft(item: prev), let new = Draft(item: change.item) else { return }
            let lines = new.differences(from: old)
            if !lines.isEmpty { event.body = lines.joined(separator: "\n") }
        case .removed:
            event.title = "Draft #\(number) booked or deleted · " + (Draft(item: change.item)?.titleTail ?? "")
            event.body = "Draft invoice #\(number) is no longer among the drafts: it was booked or deleted."
        default:
            break
        }
    }
}

/// The fields of a draft invoice that a bookkeeper cares about (nothing else is kept).
struct Draft: Equatable {
    var number: String
    var customer: String
    var recipient: String
    var date: String
    var dueDate: String
    var currency: String
    var net: Double
    var vat: Double
    var gross: Double
    var heading: String

    init?(json: JSONValue) {
        guard let n = json["draftInvoiceNumber"]?.stringValue else { return nil }
        number = n
        customer = json["customer"]?["customerNumber"]?.stringValue ?? ""
        recipient = json["recipient"]?["name"]?.stringValue ?? ""
        date = json["date"]?.stringValue ?? ""
        dueDate = json["dueDate"]?.stringValue ?? ""
        currency = json["currency"]?.stringValue ?? ""
        net = json["netAmount"]?.doubleValue ?? 0
        vat = json["vatAmount"]?.doubleValue ?? 0
        gross = json["grossAmount"]?.doubleValue ?? 0
        heading = json["notes"]?["heading"]?.stringValue ?? ""
    }

    init?(item: Item) {
        let d = item.data
        guard item.kind == "draft-invoice" else { return nil }
        number = item.key
        customer = d["customer"]?.stringValue ?? ""
        recipient = d["recipient"]?.stringValue ?? ""
        date = d["date"]?.stringValue ?? ""
        dueDate = d["dueDate"]?.stringValue ?? ""
        currency = d["currency"]?.stringValue ?? ""
        net = d["netAmount"]?.doubleValue ?? 0
        vat = d["vatAmount"]?.doubleValue ?? 0
        gross = d["grossAmount"]?.doubleValue ?? 0
        heading = d["heading"]?.stringValue ?? ""
    }

    var data: JSONValue {
        [
            "customer": .string(customer), "recipient": .string(recipient), "date": .string(date), "dueDate": .string(dueDate),
            "currency": .string(currency), "netAmount": .number(net), "vatAmount": .number(vat), "grossAmount": .number(gross),
            "heading": .string(heading),
        ]
    }

    /// "Kunde 106 ApS · 4,200.00 DKK"
    var titleTail: String {
        [recipient.isEmpty ? "customer \(customer)" : recipient, "\(Self.money(gross)) \(currency)"].joined(separator: " · ")
    }

    var item: Item {
        var body = ["due \(dueDate.isEmpty ? "?" : dueDate)", "net \(Self.money(net)) + VAT \(Self.money(vat)) \(currency)"]
        if !heading.isEmpty { body.append(heading) }
        return Item(
            key: number, kind: "draft-invoice", title: "Draft #\(number) · \(titleTail)", body: body.joined(separator: " · "),
            data: data,
            fingerprint: Fingerprint.of([customer, recipient, date, dueDate, currency, Self.money(net), Self.money(vat), Self.money(gross), heading]))
    }

    /// Readable "field old → new" lines.
    func differences(from old: Draft) -> [String] {
        var out: [String] = []
        func text(_ name: String, _ a: String, _ b: String) { if a != b { out.append("\(name) \(a.isEmpty ? "–" : a) → \(b.isEmpty ? "–" : b)") } }
        func amount(_ name: String, _ a: Double, _ b: Double) {
            if Self.money(a) != Self.money(b) { out.append("\(name) \(Self.money(a)) → \(Self.money(b)) \(currency)") }
        }
        amount("gross", old.gross, gross)
        amount("net", old.net, net)
        amount("VAT", old.vat, vat)
        text("currency", old.currency, currency)
        text("customer", old.customer, customer)
        text("recipient", old.recipient, recipient)
        text("date", old.date, date)
        text("due", old.dueDate, dueDate)
        text("heading", old.heading, heading)
        return out
    }

    /// 4200 → "4,200.00" (fixed grouping, whatever the locale).
    static func money(_ v: Double) -> String {
        // No real invoice comes near 10^15, but a response may say so (or "nan"): Int64(_:) trapped
        // on those (found by `make fuzz`). Anything in range formats as before (it is in fingerprints).
        guard v.isFinite, abs(v) < 1e15 else { return "\(v)" }
        let cents = Int64((abs(v) * 100).rounded())
        var whole = String(cents / 100)
        var grouped = ""
        while whole.count > 3 {
            grouped = "," + whole.suffix(3) + grouped
            whole.removeLast(3)
        }
        let frac = zeroPadded(cents % 100, width: 2)
        return (v < 0 && cents != 0 ? "-" : "") + whole + grouped + "." + frac
    }
}
