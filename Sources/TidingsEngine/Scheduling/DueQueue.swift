import FoundationEssentials
import TidingsPluginAPI

/// A min-heap of (due time, source name): the next source to poll is always on top.
struct DueQueue {
    private var heap = MinHeap<Date, String>()
    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    var peek: (due: Date, name: String)? { heap.top.map { ($0.key, $0.value) } }

    mutating func push(_ due: Date, _ name: String) { heap.push(due, name) }

    mutating func pop() -> (due: Date, name: String)? { heap.pop().map { ($0.key, $0.value) } }

    /// Rewrites every entry (after a clock jump) and restores heap order.
    mutating func remap(_ f: (Date, String) -> Date) {
        let old = heap.elements
        heap = MinHeap()
        for e in old { heap.push(f(e.key, e.value), e.value) }
    }
}
