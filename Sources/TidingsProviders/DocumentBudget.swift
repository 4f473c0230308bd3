import TidingsPluginAPI

/// What reading one fetched document may cost in all, shared by every walk over it: a feed's
/// texts (each title, body and attribute, entities expanded, and the markup they hold,
/// reparsed), a page's walks (the CSS selection, each selected element's rendering, each key)
/// and its XPath evaluations. Limits per text or per element were not enough: one entity
/// referenced in every item, or selections nested in one another, multiplied them (issue 30
/// items 11–13: minutes of CPU and gigabytes for one poll). Past the budget the document is a
/// poll error naming the limit; past the poll's timeout (``WorkStop``) the walks stop.
final class DocumentBudget {
    enum Kind { case feed, page }
    let kind: Kind
    /// Text bytes collected or rendered, and nodes walked, in all.
    let maxBytes: Int
    let maxNodes: Int
    /// XPath operations, all evaluations on the document together.
    let maxOperations: UInt
    private(set) var bytes = 0
    private(set) var nodes = 0
    private(set) var operations: UInt = 0
    /// An XPath evaluation ran out of the operations left.
    private(set) var operationsRanOut = false
    /// The poll's time ran out meanwhile.
    private(set) var stopped = false

    init(kind: Kind, maxBytes: Int, maxNodes: Int, maxOperations: UInt = PageXPath.maxOperations) {
        self.kind = kind
        self.maxBytes = maxBytes
        self.maxNodes = maxNodes
        self.maxOperations = maxOperations
    }

    /// A feed: text 4 × the document's size + 1 MiB, at most 32 MiB; nodes its size + 200,000, at most 16 million.
    static func feed(documentSize n: Int) -> DocumentBudget {
        DocumentBudget(kind: .feed, maxBytes: min(4 * n + (1 << 20), 32 << 20), maxNodes: min(n + 200_000, 16_000_000))
    }

    /// A page: rendered text 8 × its size within max_body (at least 1 MiB); nodes 2 × its size
    /// (at least 2 million); XPath operations 20 million.
    static func page(pageSize n: Int, maxBody: Int) -> DocumentBudget {
        DocumentBudget(kind: .page, maxBytes: max(1 << 20, min(8 * n, maxBody)), maxNodes: max(2_000_000, 2 * n))
    }

    /// Spent (or stopped): walks end, and the document is an error (``check()``).
    var spent: Bool { stopped || operationsRanOut || bytes > maxBytes || nodes > maxNodes }

    /// Counts a node walked; false once the budget is spent. Every 1024 nodes it looks
    /// whether the poll's work was stopped.
    func visit() -> Bool {
        nodes += 1
        if nodes & 1023 == 0, WorkStop.requested { stopped = true }
        return !spent
    }

    func add(bytes n: Int) { bytes += n }
    func add(operations n: UInt) { operations += n }
    func ranOutOfOperations() { operationsRanOut = true }
    var operationsLeft: UInt { maxOperations > operations ? maxOperations - operations : 0 }

    /// Throws if the budget ran out: the document is not read (its text would be cut anywhere).
    func check() throws {
        let what = kind == .feed ? "feed" : "page"
        if stopped || WorkStop.current?.isStopped == true {
            throw PollError(.transient, "stopped reading the \(what): the poll ran out of time")
        }
        switch kind {
        case .feed where bytes > maxBytes:
            throw PollError(
                .transient,
                "the feed's text is more than \(maxBytes) bytes with its entities expanded (tidings reads at most 4 × the document's size + 1 MiB, and 32 MiB): not read")
        case .feed where nodes > maxNodes:
            throw PollError(
                .transient,
                "the feed's text spans more than \(maxNodes) nodes with its entities expanded (tidings reads at most the document's size in bytes + 200,000): not read")
        case .page where bytes > maxBytes:
            throw PollError(
                .transient,
                "the selected elements' text is more than \(maxBytes) bytes in all (tidings renders at most 8 × the page's size, within max_body): nested selections? not read")
        case .page where operationsRanOut:
            throw PollError(
                .transient,
                "the XPath evaluations on this page took more than \(maxOperations) operations in all (tidings' limit per page, keys included): not read")
        case .page where nodes > maxNodes:
            throw PollError(
                .transient,
                "reading the selection walked more than \(maxNodes) nodes (tidings walks at most 2 × the page's size in bytes): nested selections? not read")
        default:
            break
        }
    }
}
