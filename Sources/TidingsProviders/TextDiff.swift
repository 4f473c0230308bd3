/// Line diffs for `changed` page events: Myers' O((N+M)·D) algorithm with a bound on its cost,
/// and the unified format (`---`/`+++`, `@@` hunks with 3 lines of context).
enum TextDiff {
    enum Op: Equatable {
        case same(String)
        case removed(String)
        case added(String)
    }

    /// At most this many edits are searched for a shortest script, and at most `maxWork` steps
    /// spent: beyond either, the common head and tail are kept and everything between them is
    /// removed and added (a correct script, not a shortest one).
    static let maxEdits = 1000
    static let maxWork = 2_000_000

    /// An edit script turning `a` into `b`; `minimal` false when a bound cut the search.
    static func lines(_ a: [String], _ b: [String], maxEdits: Int = TextDiff.maxEdits, maxWork: Int = TextDiff.maxWork)
        -> (ops: [Op], minimal: Bool)
    {
        // Lines as numbers: comparing Ints in the inner loop, not strings.
        var ids: [String: Int] = [:]
        func id(_ line: String) -> Int {
            if let known = ids[line] { return known }
            ids[line] = ids.count
            return ids.count - 1
        }
        let x = a.map(id)
        let y = b.map(id)
        var head = 0
        while head < x.count, head < y.count, x[head] == y[head] { head += 1 }
        var tail = 0
        while tail < x.count - head, tail < y.count - head, x[x.count - 1 - tail] == y[y.count - 1 - tail] { tail += 1 }
        let midA = Array(x[head..<(x.count - tail)])
        let midB = Array(y[head..<(y.count - tail)])

        var ops: [Op] = a[..<head].map { .same($0) }
        var minimal = true
        if let script = myers(midA, midB, maxEdits: maxEdits, maxWork: maxWork) {
            var i = head
            var j = head
            for step in script {
                switch step {
                case .same:
                    ops.append(.same(a[i]))
                    i += 1
                    j += 1
                case .removed:
                    ops.append(.removed(a[i]))
                    i += 1
                case .added:
                    ops.append(.added(b[j]))
                    j += 1
                }
            }
        } else {
            minimal = false
            ops += a[head..<(a.count - tail)].map { .removed($0) }
            ops += b[head..<(b.count - tail)].map { .added($0) }
        }
        ops += a[(a.count - tail)...].map { .same($0) }
        return (ops, minimal)
    }

    private enum Step { case same, removed, added }

    /// The shortest edit script of `a` → `b`, or nil past `maxEdits` edits or `maxWork` steps.
    private static func myers(_ a: [Int], _ b: [Int], maxEdits: Int, maxWork: Int) -> [Step]? {
        let n = a.count
        let m = b.count
        if n == 0 { return Array(repeating: .added, count: m) }
        if m == 0 { return Array(repeating: .removed, count: n) }
        let limit = min(n + m, maxEdits)
        let offset = limit + 1
        var v = [Int](repeating: 0, count: 2 * limit + 3)
        // trace[d]: v before round d, for k in -d...d (what the way back reads).
        var trace: [[Int]] = []
        var work = 0
        for d in 0...limit {
            trace.append(Array(v[(offset - d)...(offset + d)]))
            for k in stride(from: -d, through: d, by: 2) {
                var x = (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) ? v[offset + k + 1] : v[offset + k - 1] + 1
                var y = x - k
                let x0 = x
                while x < n, y < m, a[x] == b[y] {
                    x += 1
                    y += 1
                }
                work += 1 + x - x0
                v[offset + k] = x
                if x >= n && y >= m { return backtrack(trace, n: n, m: m, d: d) }
            }
            if work > maxWork { return nil }
        }
        return nil
    }

    private static func backtrack(_ trace: [[Int]], n: Int, m: Int, d final: Int) -> [Step] {
        var steps: [Step] = []
        var x = n
        var y = m
        var d = final
        while d > 0 {
            let v = trace[d]
            func at(_ k: Int) -> Int { v[k + d] }
            let k = x - y
            let prevK = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1
            let prevX = at(prevK)
            let prevY = prevX - prevK
            while x > prevX && y > prevY {
                steps.append(.same)
                x -= 1
                y -= 1
            }
            steps.append(x == prevX ? .added : .removed)
            x = prevX
            y = prevY
            d -= 1
        }
        while x > 0 && y > 0 {
            steps.append(.same)
            x -= 1
            y -= 1
        }
        return steps.reversed()
    }

    /// The script in unified format with `context` lines around each change, cut past `maxBytes`
    /// with a line saying how many lines were left out. Empty when nothing changed.
    static func unified(_ ops: [Op], from: String = "before", to: String = "after", context: Int = 3, maxBytes: Int = 8000) -> String {
        let changes = ops.indices.filter { if case .same = ops[$0] { return false } else { return true } }
        guard !changes.isEmpty else { return "" }
        // Hunks: runs of changes less than 2 × context apart, with context on each side.
        var hunks: [Range<Int>] = []
        var start = max(changes[0] - context, 0)
        var end = min(changes[0] + context + 1, ops.count)
        for c in changes.dropFirst() {
            if c - context <= end {
                end = min(c + context + 1, ops.count)
            } else {
                hunks.append(start..<end)
                start = c - context
                end = min(c + context + 1, ops.count)
            }
        }
        hunks.append(start..<end)
        // Line numbers before each op.
        var aLine = [Int](repeating: 0, count: ops.count + 1)
        var bLine = [Int](repeating: 0, count: ops.count + 1)
        for (i, op) in ops.enumerated() {
            aLine[i + 1] = aLine[i] + (op.isAdded ? 0 : 1)
            bLine[i + 1] = bLine[i] + (op.isRemoved ? 0 : 1)
        }
        var out = ["--- \(from)", "+++ \(to)"]
        for h in hunks {
            let aCount = aLine[h.upperBound] - aLine[h.lowerBound]
            let bCount = bLine[h.upperBound] - bLine[h.lowerBound]
            let aStart = aCount == 0 ? aLine[h.lowerBound] : aLine[h.lowerBound] + 1
            let bStart = bCount == 0 ? bLine[h.lowerBound] : bLine[h.lowerBound] + 1
            out.append("@@ -\(aStart),\(aCount) +\(bStart),\(bCount) @@")
            for op in ops[h] { out.append(op.line) }
        }
        var text = ""
        for (i, line) in out.enumerated() {
            if text.utf8.count + line.utf8.count + 1 > maxBytes {
                text += "… (diff cut: \(out.count - i) more lines)"
                return text
            }
            text += line + "\n"
        }
        return String(text.dropLast())
    }
}

extension TextDiff.Op {
    var isAdded: Bool { if case .added = self { return true } else { return false } }
    var isRemoved: Bool { if case .removed = self { return true } else { return false } }
    /// The op as a unified diff line.
    var line: String {
        switch self {
        case .same(let s): return " " + s
        case .removed(let s): return "-" + s
        case .added(let s): return "+" + s
        }
    }
}
