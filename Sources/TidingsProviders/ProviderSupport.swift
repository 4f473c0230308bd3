import FoundationEssentials
import TidingsPOSIX
import TidingsPluginAPI

/// Small helpers the built-in providers share: base URLs, JSON bodies, error wording.
enum ProviderSupport {
    /// Reads a base URL option (`http` or `https`, with a host), trailing slashes removed.
    static func baseURL(_ options: OptionReader, _ key: String = "base_url", default fallback: String? = nil) throws -> URL {
        let given: ConfigURL
        if let fallback {
            given = try options.configURL(key) ?? ConfigURL(fallback)
        } else {
            given = try options.requiredConfigURL(key)
        }
        var text = given.raw.trimmed(newlines: false)
        while text.hasSuffix("/") { text.removeLast() }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw options.error(key, "\(options.what): '\(key)' must be an http:// or https:// URL, not \"\(given.shown)\"")
        }
        return url
    }

    /// `base` + `path` (path starts with `/`), keeping any path prefix of the base.
    static func join(_ base: URL, _ path: String, query: [URLQueryItem] = []) -> URL {
        var c = URLComponents(url: base, resolvingAgainstBaseURL: false)!
        c.path = c.path + path
        if !query.isEmpty {
            // Encode '+' too: URLComponents leaves it, and servers read it as a space.
            c.percentEncodedQueryItems = query.map {
                URLQueryItem(name: $0.name, value: $0.value.map(encodeQueryValue))
            }
        }
        return c.url!
    }

    static func encodeQueryValue(_ s: String) -> String {
        // Foundation's .urlQueryAllowed (RFC 3986's query characters) less "+&=#;".
        s.percentEncoded { isUnreservedURLByte($0) || "!$'()*,:@/?".utf8.contains($0) }
    }

    /// Parses a JSON response body, or fails the poll as a malformed response.
    static func json(_ response: HTTPResponse, what: String) throws -> JSONValue {
        try json(response.body, what: what)
    }

    /// Parses a JSON body, or fails the poll as a malformed response (the pure half of the above).
    static func json(_ body: Data, what: String) throws -> JSONValue {
        do {
            return try JSONValue.parse(body)
        } catch {
            throw PollError(.transient, "\(what): \(error) (body: \(PollError.excerpt(body)))")
        }
    }

    static func isSuccess(_ response: HTTPResponse) -> Bool { (200..<300).contains(response.status) }

    /// A list of regular expressions (SafeRegex, linear time), each able to search a whole
    /// 64 Ki-scalar text (a page line, a feed title) within its step budget; a bad one is a
    /// config error at its line.
    static func patterns(_ options: OptionReader, _ key: String) throws -> [SafeRegex] {
        try (options.stringList(key) ?? []).map { (pattern: String) throws -> SafeRegex in
            do { return try SafeRegex(pattern, longestInput: SafeRegex.maxInputScalars) } catch {
                throw options.error(key, "\(options.what): '\(key)': invalid regular expression \"\(pattern)\": \(error)")
            }
        }
    }

    /// `ca_file` (DESIGN §12): a PEM file of the CAs to trust for https instead of the system's.
    /// One that is missing or unreadable is a config error at its line.
    static func caFile(_ options: OptionReader) throws -> String? {
        guard let path = try options.path("ca_file") else { return nil }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw options.error("ca_file", "\(options.what): cannot read ca_file \(path): no such file")
        }
        guard !isDirectory, FileManager.default.isReadableFile(atPath: path) else {
            throw options.error("ca_file", "\(options.what): cannot read ca_file \(path): \(isDirectory ? "it is a directory" : "permission denied")")
        }
        return path
    }
}
