extension StringProtocol {
    /// Whether `word` occurs in the text, compared byte for byte in UTF-8: what `contains(_:)`
    /// answers for an ASCII word, without the substring searcher it sets up on each call (which,
    /// for each of 10,000 plugin files, cost more than reading the file).
    package func containsBytes(of word: String) -> Bool {
        let w = Array(word.utf8)
        guard let first = w.first else { return true }
        let u = utf8
        var i = u.startIndex
        while i != u.endIndex {
            if u[i] == first {
                var j = i
                var k = 0
                while k < w.count, j != u.endIndex, u[j] == w[k] {
                    u.formIndex(after: &j)
                    k += 1
                }
                if k == w.count { return true }
            }
            u.formIndex(after: &i)
        }
        return false
    }
}
