import FoundationEssentials

/// How a URL tidings requests is shown (messages, logs, a page item's `url`): never with its
/// user info; without its query and fragment when `query` is false, as for a URL given as a
/// secret (`url_file` …) or a sink's, whose query may carry a token.
package enum ShownURL {
    package static func of(_ url: URL, query: Bool = true) -> String {
        guard url.user != nil || url.password != nil || (!query && (url.query != nil || url.fragment != nil)),
            var c = URLComponents(url: url, resolvingAgainstBaseURL: false)
        else { return url.absoluteString }
        c.user = nil
        c.password = nil
        if !query {
            c.query = nil
            c.fragment = nil
        }
        return c.string ?? "(url)"
    }
}
