import Foundation
import TidingsPluginAPI

/// A min-heap of (due time, source name): the next source to poll is always on top.
struct DueQueue {
    private var heap: [(due: Date, name: String)] = []
    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    var peek: (due: Date, name: String)? { heap.first }

    mutating func push(_ due: Date, _ name: String) {
        heap.append((due, name))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].due < heap[parent].due else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> (due: Date, name: String)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < heap.count && heap[l].due < heap[m].due { m = l }
            if r < heap.count && heap[r].due < heap[m].due { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return top
    }

    /// Rewrites every entry (after a clock jump) and restores heap order.
    mutating func remap(_ f: (Date, String) -> Date) {
        let old = heap
        heap = []
        for e in old { push(f(e.due, e.name), e.name) }
    }
}
