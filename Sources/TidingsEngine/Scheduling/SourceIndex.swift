/// Sources by name without a dictionary: a `[String: Int]` of 100,000 names was 6.3 MB in
/// every daemon (issue 33). The loader sorts the sources by name, so a lookup is a binary
/// search in the list itself; a list in another order (tests build some) gets a sorted
/// permutation of its indices. Where names repeat, the first one is found.
package struct SourceIndex: Sendable {
    /// Indices of the sources in name order; nil when the list is in name order itself.
    private let order: [Int32]?

    package init(_ sources: [SourceConfig]) {
        var sorted = true
        for i in sources.indices.dropFirst() where !(sources[i - 1].name < sources[i].name) {
            sorted = false
            break
        }
        order =
            sorted
            ? nil
            : sources.indices.sorted { a, b in
                sources[a].name < sources[b].name || (sources[a].name == sources[b].name && a < b)
            }.map { Int32($0) }
    }

    /// The index in `sources` (the list this index was made of) of the source named `name`.
    package func index(of name: String, in sources: [SourceConfig]) -> Int? {
        var low = 0
        var high = sources.count
        while low < high {
            let middle = (low + high) / 2
            if sources[at(middle)].name < name { low = middle + 1 } else { high = middle }
        }
        guard low < sources.count else { return nil }
        let i = at(low)
        return sources[i].name == name ? i : nil
    }

    private func at(_ k: Int) -> Int { order.map { Int($0[k]) } ?? k }
}
