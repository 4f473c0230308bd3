import FoundationEssentials

extension SourceDraft {
    /// The draft's `url`: an option, or, when it holds a password (`https://me:pw@host/`), a
    /// secret (`url_file`), never written inline. `watchedURL` is the address without the password.
    package mutating func setURL(_ url: String) {
        if let (before, after) = Self.splitPassword(url) {
            secrets.append(SecretDraft(option: "url", value: url))
            watchedURL = before + after
        } else {
            options.append(SourceOption("url", .string(url)))
            watchedURL = url
        }
    }

    /// `scheme://` and what follows `user:password@`, when the address holds a password.
    static func splitPassword(_ url: String) -> (String, String)? {
        guard let scheme = url.firstRange(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@"), authority[..<at].contains(":" as Character) else { return nil }
        return (String(url[..<scheme.upperBound]), String(rest[rest.index(after: at)...]))
    }
}
