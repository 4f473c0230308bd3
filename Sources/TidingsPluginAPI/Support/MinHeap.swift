/// A binary min-heap of (key, value) pairs: the smallest key is on top. The scheduler's due
/// queue and the timeout thread's deadlines.
package struct MinHeap<Key: Comparable, Value> {
    package private(set) var elements: [(key: Key, value: Value)] = []

    package init() {}

    package var count: Int { elements.count }
    package var isEmpty: Bool { elements.isEmpty }
    package var top: (key: Key, value: Value)? { elements.first }

    package mutating func push(_ key: Key, _ value: Value) {
        elements.append((key, value))
        var i = elements.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard elements[i].key < elements[parent].key else { break }
            elements.swapAt(i, parent)
            i = parent
        }
    }

    @discardableResult
    package mutating func pop() -> (key: Key, value: Value)? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let top = elements.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < elements.count && elements[l].key < elements[m].key { m = l }
            if r < elements.count && elements[r].key < elements[m].key { m = r }
            if m == i { break }
            elements.swapAt(i, m)
            i = m
        }
        return top
    }
}
