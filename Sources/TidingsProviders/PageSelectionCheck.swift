import FoundationEssentials

extension PageProvider {
    /// A `select` value checked as the page provider will read it (`css:…`, `xpath:…`): the
    /// problem, or nil. For `tidings import`, which must not write a source the loader refuses.
    package static func selectionProblem(_ raw: String) -> String? {
        if raw.hasPrefix("css:") {
            do { _ = try CSSSelector(String(raw.dropFirst(4))) } catch { return "invalid CSS selector: \(error)" }
            return nil
        }
        if raw.hasPrefix("xpath:") {
            return PageXPath.check(String(raw.dropFirst(6))).map { "invalid XPath: \($0)" }
        }
        return "must start with \"css:\" or \"xpath:\""
    }
}
