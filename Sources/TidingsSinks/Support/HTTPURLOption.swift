import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

extension OptionReader {
    /// An `http://` or `https://` URL option with a host (a channel's server or API endpoint),
    /// else `fallback`; anything else is a config error at the option's line. User info is
    /// refused: credentials have their own (secret) options, so they never sit in a URL that
    /// messages might show.
    package func httpURL(_ key: String, default fallback: URL? = nil) throws -> URL {
        guard let given = try secretCapableURL(key) else {
            if let fallback { return fallback }
            throw error(nil, "\(what): missing required key '\(key)'")
        }
        let key = givenVariant(of: key)
        guard let url = URL(string: given.raw), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw error(key, "\(what): '\(key)' must be an http:// or https:// URL, not \"\(given.shown)\"")
        }
        guard url.user == nil, url.password == nil else {
            throw error(key, "\(what): '\(key)' must not carry a user name or password; use the sink's credential options")
        }
        return url
    }
}
