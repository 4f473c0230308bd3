extension StringProtocol {
    /// Whether `word` occurs in the text, compared byte for byte in UTF-8: what `contains(_:)`
    /// answers for an ASCII word, without the substring searcher it sets up on each call (which,
    /// for each of 10,000 plugin files, cost more than reading the file).
    package func containsBytes(of word: String) -> Bool {
        var word = word
        return word.withUTF8 { w in
            if let found = utf8.withContiguousStorageIfAvailable({ Self.search(w, in: $0) }) { return found }
            return Array(utf8).withUnsafeBufferPointer { Self.search(w, in: $0) }
        }
    }

    private static func search(_ word: UnsafeBufferPointer<UInt8>, in text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = word.first else { return true }
        guard text.count >= word.count else { return false }
        var i = 0
        while i <= text.count - word.count {
            if text[i] == first {
                var k = 1
                while k < word.count && text[i + k] == word[k] { k += 1 }
                if k == word.count { return true }
            }
            i += 1
        }
        return false
    }
}
