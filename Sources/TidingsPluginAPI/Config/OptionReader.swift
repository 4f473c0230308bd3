import FoundationEssentials
import Glibc

/// Typed, line-aware access to one config table (a source, a sink, `[defaults]`).
///
/// Every key read is marked consumed; ``finish()`` turns the rest into
/// "unknown key" errors, so a typo never silently disables a setting.
package final class OptionReader {
    package let table: ConfigTable
    /// Where the table was written: the file, and the directory relative paths resolve against.
    package let file: String
    package let baseDirectory: String
    /// What the table is, for messages: `source "foo"`, `sink "ops"`.
    package let what: String
    /// Every key asked for, present or not (a source asks for some 25, each once or twice): a
    /// list, not a set, since hashing each key cost more than loading needs (finish() reads it once).
    private var consumed: [String] = []
    /// For an executable in `plugins.d` (bare, or beside its `NAME.toml`): `./NAME`,
    /// the exec provider's default `command`.
    package var implicitCommand: String?
    /// Hashes of the secret values read (however given, header secrets included): part of the source's
    /// config hash, so a changed password file counts as a changed config (clears auth-failed).
    package private(set) var secretHashes: [String] = []
    /// Set by a ``SecretPolicy/lenient`` load: receives each secret that cannot be read, which
    /// then reads as a placeholder (see ``secret(_:required:)``). Nil: such a secret is an error.
    package var lenientSecrets: ((ConfigError) -> Void)?
    /// Whether this reader, or a table read through it (``subtable(_:)``), was asked for a secret
    /// written inline (`X = "…"`, or a password in a URL): its table then holds a secret, and is
    /// not to be copied anywhere (the parse cache keeps no such table).
    package var readInlineSecret: Bool { inlineSecret.seen }
    /// Shared with the readers of its subtables.
    private var inlineSecret = InlineSecretMark()
    /// Notes that an inline secret was asked for (``readInlineSecret``).
    func markInlineSecret() { inlineSecret.seen = true }
    /// Receives ``warning(_:_:)``s (the loader's: `config check` and the daemon show them).
    package var warnings: ((ConfigError) -> Void)?
    /// A disabled source's table: a secret file still holding the example's `CHANGE-ME…` is
    /// what one expects there, not worth a warning at every start.
    package var placeholdersExpected = false

    package init(_ table: ConfigTable, what: String, baseDirectory: String? = nil) {
        self.table = table
        self.file = table.file
        self.baseDirectory = baseDirectory ?? PathText.parent(table.file)
        self.what = what
    }

    // MARK: errors

    package func error(_ key: String?, _ message: String) -> ConfigError {
        let line = key.flatMap { table[$0]?.line } ?? table.line
        return ConfigError(file: file, line: line, message)
    }

    /// Something that works but is probably not what was meant, at `key`'s line.
    package func warning(_ key: String?, _ message: String) { warnings?(error(key, message)) }

    private func typeError(_ key: String, expected: String, got node: ConfigNode) -> ConfigError {
        error(key, "\(what): '\(key)' must be \(expected), not \(node.typeName)")
    }

    // MARK: presence

    package func has(_ key: String) -> Bool { table[key] != nil }

    /// Marks keys as known without reading them (e.g. keys another layer handles).
    package func markConsumed(_ keys: String...) { consumed += keys }

    private func node(_ key: String) -> ConfigNode? {
        consumed.append(key)
        return table[key]
    }

    // MARK: scalars

    package func string(_ key: String) throws -> String? {
        guard let n = node(key) else { return nil }
        guard case .string(let s) = n.value else { throw typeError(key, expected: "a string", got: n) }
        return s
    }

    package func requiredString(_ key: String) throws -> String {
        guard let s = try string(key) else { throw error(nil, "\(what): missing required key '\(key)'") }
        guard !s.isEmpty else { throw error(key, "\(what): '\(key)' must not be empty") }
        return s
    }

    package func bool(_ key: String) throws -> Bool? {
        guard let n = node(key) else { return nil }
        guard case .bool(let b) = n.value else { throw typeError(key, expected: "true or false", got: n) }
        return b
    }

    package func int(_ key: String, range: ClosedRange<Int>? = nil) throws -> Int? {
        guard let n = node(key) else { return nil }
        guard case .int(let i) = n.value else { throw typeError(key, expected: "an integer", got: n) }
        if let range, !range.contains(i) {
            throw error(key, "\(what): '\(key)' must be between \(range.lowerBound) and \(range.upperBound), not \(i)")
        }
        return i
    }

    package func double(_ key: String, range: ClosedRange<Double>? = nil) throws -> Double? {
        guard let n = node(key) else { return nil }
        let d: Double
        switch n.value {
        case .double(let v): d = v
        case .int(let v): d = Double(v)
        default: throw typeError(key, expected: "a number", got: n)
        }
        if let range, !range.contains(d) {
            throw error(key, "\(what): '\(key)' must be between \(range.lowerBound) and \(range.upperBound), not \(d)")
        }
        return d
    }

    /// A duration string (`"30s"`, `"1h30m"`), in seconds.
    package func duration(_ key: String, minimum: TimeInterval = 0) throws -> TimeInterval? {
        guard let n = node(key) else { return nil }
        guard case .string(let s) = n.value else { throw typeError(key, expected: "a duration string like \"5m\"", got: n) }
        do {
            let seconds = try DurationParser.seconds(s)
            if seconds < minimum {
                throw error(key, "\(what): '\(key)' must be at least \(DurationParser.format(minimum))")
            }
            return seconds
        } catch let e as DurationParser.Error {
            throw error(key, "\(what): '\(key)': \(e)")
        }
    }

    /// A size: an integer of bytes or a string like `"10MiB"`, `"512KiB"`.
    package func byteSize(_ key: String) throws -> Int? {
        guard let n = node(key) else { return nil }
        switch n.value {
        case .int(let i) where i > 0: return i
        case .string(let s):
            let units: [(String, Int)] = [("KiB", 1024), ("MiB", 1 << 20), ("GiB", 1 << 30), ("KB", 1000), ("MB", 1_000_000), ("B", 1)]
            for (u, f) in units where s.hasSuffix(u) {
                // `"1e300MiB"` / `"infKB"` trapped in `Int(_:)`; anything past 2^53 bytes is a typo.
                if let v = Double(s.dropLast(u.count).trimmed(newlines: false)), v > 0, v * Double(f) <= 0x1p53 {
                    return Int(v * Double(f))
                }
            }
            throw error(key, "\(what): '\(key)': invalid size \"\(s)\" (use bytes or e.g. \"10MiB\")")
        default:
            throw typeError(key, expected: "a size like \"10MiB\"", got: n)
        }
    }

    /// A string or a list of strings (match fields, commands).
    package func stringList(_ key: String) throws -> [String]? {
        guard let n = node(key) else { return nil }
        switch n.value {
        case .string(let s): return [s]
        case .array(let items):
            return try items.map { item in
                guard case .string(let s) = item.value else { throw typeError(key, expected: "a list of strings", got: item) }
                return s
            }
        default: throw typeError(key, expected: "a string or a list of strings", got: n)
        }
    }

    /// A nested table, as its own reader (its keys are checked by the caller's ``finish()``).
    package func subtable(_ key: String) throws -> OptionReader? {
        guard let n = node(key) else { return nil }
        guard case .table(let t) = n.value else { throw typeError(key, expected: "a table", got: n) }
        let sub = OptionReader(t, what: "\(what) '\(key)'", baseDirectory: baseDirectory)
        sub.lenientSecrets = lenientSecrets
        sub.inlineSecret = inlineSecret
        sub.warnings = warnings
        sub.placeholdersExpected = placeholdersExpected
        return sub
    }

    /// A table of request headers (`headers = { Accept = "…", Authorization_file = "…" }`), for
    /// every source and sink that sends HTTP: the one reader of header tables (``HeaderTable``).
    ///
    /// Each value may be given as `Name` (inline), `Name_file`, `Name_env` or `Name_credential`,
    /// as any secret option. Values from a file, the environment or a credential are secrets, and
    /// so is an inline value of a credential-like header (``HeaderTable/isCredentialLike(_:)``):
    /// refused in a file that group or others can read, as any inline secret.
    package func headers(_ key: String = "headers") throws -> HeaderTable {
        guard let sub = try subtable(key) else { return HeaderTable() }
        var fields: [HeaderTable.Field] = []
        var names: Set<String> = []
        for k in sub.table.keys {
            let name = SecretSource.optionName(of: k)
            guard names.insert(name).inserted else { continue }  // `secret` reads all variants at once
            guard HeaderTable.isValidName(name) else {
                throw sub.error(k, "\(sub.what): '\(name)' is not a valid HTTP header name")
            }
            let value: HeaderTable.Value
            if k != name || HeaderTable.isCredentialLike(name) {
                guard let secret = try sub.secret(name, required: false, shape: .headerValue) else { continue }
                value = .secret(secret)
            } else {
                value = .plain(try sub.string(k) ?? "")
            }
            guard HeaderTable.isValidValue(value.text) else {
                throw sub.error(k, "\(sub.what): the value of header '\(name)' contains a line break or NUL")
            }
            fields.append(HeaderTable.Field(name: name, value: value))
        }
        try sub.finish()
        secretHashes += sub.secretHashes
        return HeaderTable(fields)
    }

    /// An absolute path: `~` expands to `$HOME`, relative paths resolve against the config file's directory.
    package func path(_ key: String) throws -> String? {
        guard let s = try string(key) else { return nil }
        return resolvePath(s)
    }

    package func resolvePath(_ s: String) -> String {
        let expanded = PathResolver.expandTilde(s)
        if expanded.hasPrefix("/") { return PathText.standardized(expanded) }
        return PathText.standardized(PathText.appending(expanded, to: baseDirectory))
    }

    // MARK: secrets

    /// A secret option `X`, given as `X` (inline), `X_file` (path, trailing newline stripped),
    /// `X_env` (environment variable name) or `X_credential` (a systemd credential: the file
    /// `$CREDENTIALS_DIRECTORY/NAME`, as `LoadCredential=` provides it). Exactly one may be set.
    ///
    /// An inline secret in a file that group or others can read is refused, as ssh refuses
    /// a readable private key.
    ///
    /// Under ``lenientSecrets`` a secret that cannot be read is reported there and reads as
    /// nil, or if required as an empty placeholder that authenticates nowhere.
    package func secret(_ key: String, required: Bool, shape: SecretShape = .opaque) throws -> Secret? {
        try secret(key, required: required, shape: shape, inline: .string)
    }

    /// A secret option that holds several values (e.g. a list of URLs with tokens): inline as a
    /// string or a list of strings, or from `X_file` / `X_env` / `X_credential` one per line.
    /// Blank lines and lines starting with `#` are skipped; each value is a ``Secret`` of its own.
    package func secretLines(_ key: String, required: Bool) throws -> [Secret]? {
        guard let whole = try secret(key, required: required, shape: .opaque, inline: .stringOrList) else { return nil }
        let lines = whole.value.split(whereSeparator: \.isNewline).map { $0.trimmed(newlines: false) }
        let kept = lines.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        if kept.contains(where: { $0.count < SecretForms.minimumLength }) { try tooShort(key) }
        let values = kept.map { Secret($0) }
        if values.isEmpty && required && lenientSecrets == nil {
            throw error(has(key) ? key : nil, "\(what): '\(key)' holds no value")
        }
        return values
    }

    /// How an inline secret may be written.
    private enum InlineSecret { case string, stringOrList }

    /// An `http://` or `https://` URL with a host that tidings requests (a source's `url`, a
    /// webhook's). A password in it (`https://user:pass@host/`) is an inline secret: refused in a
    /// file that group or others can read, registered with the ``Redactor`` (the password, and
    /// the `Basic` header libcurl makes of it), and part of the config hash.
    package func requestURL(_ key: String) throws -> URL { try requestURLOption(key).url }

    /// ``requestURL(_:)``, and whether it was given as a secret (`url_file`, `url_env`,
    /// `url_credential`: see ``ConfigURL``), when it is then to be shown without its query.
    package func requestURLOption(_ key: String) throws -> (url: URL, isSecret: Bool) {
        let given = try secretCapableURL(key) ?? requiredConfigURL(key)
        let url = try requestURL(given, givenVariant(of: key))
        return (url, given.isSecret)
    }

    private func requestURL(_ given: ConfigURL, _ key: String) throws -> URL {
        guard let url = URL(string: given.raw), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw error(key, "\(what): '\(key)' must be an http:// or https:// URL, not \"\(given.shown)\"")
        }
        guard let decoded = given.password else { return url }
        if !given.isSecret { markInlineSecret() }
        if decoded.count < SecretForms.minimumLength { throw tooShortError(key, what: "the password in '\(key)'") }
        // The token of the Basic header libcurl sends; not the user name, which is no secret.
        _ = Secret(Data("\(given.user ?? ""):\(decoded)".utf8).base64EncodedString())
        guard !given.isSecret else { return url }  // hashed, and its file checked, as a secret
        secretHashes.append(Fingerprint.of(["secret", key, decoded]))
        if let mode = FilePermissions.mode(of: file), mode & 0o044 != 0 {
            throw error(
                key,
                "\(what): '\(key)' carries a password, an inline secret, in a file readable by group or others (mode \(String(mode & 0o777, radix: 8))); chmod 600 \(file), or send it as a header from a file (headers = { Authorization_file = \"…\" })"
            )
        }
        return url
    }

    private func secret(_ key: String, required: Bool, shape: SecretShape, inline: InlineSecret) throws -> Secret? {
        let text: String?
        do {
            text = try readSecret(key, required: required, inline: inline)
            if inline == .string, let text, !text.isEmpty, text.count < SecretForms.minimumLength { try tooShort(key) }
        } catch let e as ConfigError {
            guard let lenientSecrets else { throw e }
            lenientSecrets(e)
            return required ? Secret("", shape: shape) : nil
        }
        guard let text else { return nil }
        secretHashes.append(Fingerprint.of(["secret", key, text]))
        return Secret(text, shape: shape)
    }

    /// A secret shorter than ``SecretForms/minimumLength`` is refused, in every form, at the line
    /// it is given on: the ``Redactor`` cannot scrub it (it would redact ordinary words).
    private func tooShort(_ key: String) throws -> Never {
        let variant = givenVariant(of: key)
        throw tooShortError(variant, what: "secret '\(variant)'")
    }

    /// Which of `X`, `X_file`, `X_env`, `X_credential` is set (for a message's line), else `X`.
    package func givenVariant(of key: String) -> String {
        SecretSource.allCases.map { $0.key(key) }.first { table[$0] != nil } ?? key
    }

    package func tooShortError(_ key: String, what secret: String) -> ConfigError {
        error(
            key,
            "\(what): \(secret) is shorter than \(SecretForms.minimumLength) characters: a secret that short cannot be kept out of logs and events"
        )
    }

    private func readSecret(_ key: String, required: Bool, inline: InlineSecret) throws -> String? {
        let given = SecretSource.allCases.filter { table[$0.key(key)] != nil }
        SecretSource.allCases.forEach { markConsumed($0.key(key)) }
        if given.contains(.inline) { markInlineSecret() }
        if given.count > 1 {
            throw error(given[1].key(key), "\(what): set only one of \(SecretSource.allCases.map { "'\($0.key(key))'" }.joined(separator: ", "))")
        }
        guard let source = given.first else {
            if required {
                throw error(nil, "\(what): missing required secret '\(key)' (give '\(key)_file', '\(key)_env' or '\(key)_credential')")
            }
            return nil
        }
        let variant = source.key(key)
        let raw: String
        switch table[variant]?.value {
        case .string(let s)?:
            raw = s
        case .array(let items)? where source == .inline && inline == .stringOrList:
            raw = try items.map { item in
                guard case .string(let s) = item.value else { throw typeError(key, expected: "a list of strings", got: item) }
                return s
            }.joined(separator: "\n")
        default:
            throw error(variant, "\(what): '\(variant)' must be a string" + (source == .inline && inline == .stringOrList ? " or a list of strings" : ""))
        }
        switch source {
        case .inline:
            if let mode = FilePermissions.mode(of: file), mode & 0o044 != 0 {
                throw error(
                    key,
                    "\(what): inline secret '\(key)' in a file readable by group or others (mode \(String(mode & 0o777, radix: 8))); chmod 600 \(file), or use '\(key)_file'"
                )
            }
            // As a file, a variable or a credential may not be empty (an empty password lets `user:` in).
            if inline == .string && raw.isEmpty { throw error(key, "\(what): secret '\(key)' is empty: give its value, or leave the option out") }
            return raw
        case .file:
            let path = resolvePath(raw)
            // Whoever can replace the file chooses the credential tidings sends (FileTrust).
            if let p = FileTrust().check(path, as: .secretFile).first { throw error(variant, "\(what): \(p)") }
            return try readSecretFile(path, variant: variant, named: "secret file \(path)", private: true)
        case .environment:
            guard let value = ProcessInfo.processInfo.environment[raw] else {
                throw error(variant, "\(what): environment variable \(raw) (from '\(variant)') is not set")
            }
            guard !value.isEmpty else { throw error(variant, "\(what): environment variable \(raw) (from '\(variant)') is empty") }
            return value
        case .credential:
            guard !raw.isEmpty, !raw.contains("/"), raw != ".", raw != ".." else {
                throw error(variant, "\(what): '\(variant)' must name a credential (a file name, as in LoadCredential=NAME:…), not \"\(raw)\"")
            }
            guard let dir = ProcessInfo.processInfo.environment["CREDENTIALS_DIRECTORY"], !dir.isEmpty else {
                throw error(
                    variant, "\(what): '\(variant)' needs $CREDENTIALS_DIRECTORY, which is not set (systemd sets it for a unit with LoadCredential=\(raw):…)")
            }
            let path = PathText.appending(raw, to: dir)
            return try readSecretFile(path, variant: variant, named: "credential \(raw) (\(path))", private: false)
        }
    }

    /// The most a secret file may hold: a token, a password or a few URLs, not a data file.
    static let maxSecretFileBytes = 64 << 10

    /// A secret held in a file: its text without trailing line breaks, never empty. Refused,
    /// saying why: a file that cannot be opened (no such file, permission denied), one that is
    /// not a regular file (a directory, a FIFO that would never end), one larger than
    /// ``maxSecretFileBytes``, and with `private` one that group or others can read (as an
    /// inline secret in such a config file is: ssh refuses a readable private key the same way).
    /// A value still starting with `CHANGE-ME` (the shipped placeholders) is a warning, unless
    /// ``placeholdersExpected``.
    /// - Parameters:
    ///   - name: the file as messages name it.
    ///   - private: check the mode (not for systemd credentials, which systemd makes private).
    private func readSecretFile(_ path: String, variant: String, named name: String, private: Bool) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw error(variant, "\(what): cannot read \(name): \(Self.reason(errno))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw error(variant, "\(what): cannot read \(name): \(Self.reason(errno))") }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw error(variant, "\(what): cannot read \(name): it is a directory")
        default: throw error(variant, "\(what): cannot read \(name): it is not a regular file")
        }
        if `private`, st.st_mode & 0o044 != 0 {
            throw error(variant, "\(what): \(name) is readable by group or others (mode \(String(st.st_mode & 0o777, radix: 8))): chmod 600 \(path)")
        }
        guard st.st_size <= Self.maxSecretFileBytes else {
            throw error(variant, "\(what): \(name) holds \(st.st_size) bytes, more than a secret (at most \(Self.maxSecretFileBytes))")
        }
        guard let data = readBytes(fd, upTo: Self.maxSecretFileBytes + 1) else {
            throw self.error(variant, "\(what): cannot read \(name): \(Self.reason(errno))")
        }
        var text = String(decoding: data, as: UTF8.self)
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { throw error(variant, "\(what): \(name) is empty") }
        if text.hasPrefix("CHANGE-ME") && !placeholdersExpected {
            warning(variant, "\(what): \(name) still holds the example's placeholder (CHANGE-ME…): put the real secret there")
        }
        return text
    }

    /// Why a file could not be opened, in words: `no such file`, `permission denied`.
    static func reason(_ code: Int32) -> String {
        switch code {
        case ENOENT: return "no such file"
        case EACCES, EPERM: return "permission denied"
        case ENOTDIR: return "a part of the path is not a directory"
        case ELOOP: return "too many symbolic links"
        default: return String(cString: strerror(code)).lowercased()
        }
    }

    // MARK: finishing

    /// Throws ``ConfigErrors`` naming every key nobody read, each with the keys the table takes
    /// (as serde's "expected one of"): the fix is on the same line as the typo.
    package func finish() throws {
        let stray = table.keys.filter { !consumed.contains($0) }
        guard !stray.isEmpty else { return }
        let known = Set(consumed).sorted().joined(separator: ", ")
        throw ConfigErrors(stray.map { error($0, "\(what): unknown key '\($0)' (known: \(known))") })
    }
}

extension OptionReader {
    /// Whether reading `table` may read a secret, as far as its keys tell: a key of a secret's
    /// form (`X_file`, `X_env`, `X_credential`), one naming a password, token, secret, key (but
    /// an item's `key`) or auth (`token`, `bearer_token`, `api_key`: the inline forms), a
    /// `headers` table, or a string
    /// value with a password in a URL (`https://user:pass@…`), in the table or any table in it.
    /// A table for which this is false makes no ``secretHashes`` and no lenient warning, whatever
    /// reads it: a listing load (`tidings sources`, `tidings status`) makes no provider of it,
    /// and a debug build checks that every provider it does make agrees.
    package static func mayHoldSecrets(_ table: ConfigTable) -> Bool {
        table.entries.contains { key, node in secretShaped(key) || holdsSecret(node) }
    }

    /// Words of a secret option's name (matched ignoring ASCII case).
    private static let secretWords = ["password", "passwd", "token", "secret", "key", "credential", "auth", "_file", "_env", "headers"]

    private static func secretShaped(_ key: String) -> Bool {
        let k = key.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) ? key.lowercased() : key
        if k == "key" { return false }  // a provider's item key (`key = "/id"`)
        return secretWords.contains { k.containsBytes(of: $0) }
    }

    private static func holdsSecret(_ node: ConfigNode) -> Bool {
        switch node.value {
        case .string(let s): return s.utf8.contains(UInt8(ascii: "@")) && s.utf8.contains(UInt8(ascii: ":"))
        case .table(let t): return mayHoldSecrets(t)
        case .array(let items): return items.contains(where: holdsSecret)
        case .int, .double, .bool, .other: return false
        }
    }
}

/// The ways a secret option `X` can be given: the key it is written under.
enum SecretSource: CaseIterable {
    case inline, file, environment, credential

    func key(_ option: String) -> String {
        switch self {
        case .inline: return option
        case .file: return option + "_file"
        case .environment: return option + "_env"
        case .credential: return option + "_credential"
        }
    }

    /// The option a key gives: `Authorization_env` → `Authorization`.
    static func optionName(of key: String) -> String {
        for source in allCases where source != .inline {
            let suffix = source.key("")
            if key.hasSuffix(suffix), key.count > suffix.count { return String(key.dropLast(suffix.count)) }
        }
        return key
    }
}

package enum FilePermissions {
    /// POSIX mode bits of a path, or nil if it cannot be read.
    package static func mode(of path: String) -> Int? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Int(st.st_mode)
    }

    package static func isExecutableFile(_ path: String) -> Bool {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return false }
        return access(path, X_OK) == 0
    }
}

package enum PathResolver {
    package static func expandTilde(_ s: String) -> String {
        guard s == "~" || s.hasPrefix("~/") else { return s }
        let home = ProcessInfo.processInfo.environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + s.dropFirst()
    }
}

/// ``OptionReader/readInlineSecret``'s flag, one per source's table and its subtables.
private final class InlineSecretMark {
    var seen = false
}
