extension Sequence where Element: Hashable {
    /// Each element once, in the order of its first mention: `[b, a, b]` → `[b, a]`. Names
    /// given twice (`tidings check a a`) mean the same thing as once.
    package func firstMentions() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
