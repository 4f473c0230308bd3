import FoundationEssentials
import Glibc
import TidingsPluginAPI

// The one writer of `tidings add` and `tidings import` (DESIGN §14): a ``SourceDraft`` becomes
// `plugins_dir/NAME.toml`, commented for a person to edit, under a name no source has yet, in
// one atomic step that never replaces a file; secrets go to files of their own (0600) in
// `plugins_dir/secrets`, named by a `KEY_file` line, never inline.

/// What the writer would do with one draft: write `text` to `path` (and the secret files), or
/// nothing, because a configured source watches the same address already.
package struct SourcePlan: Sendable, Equatable {
    package enum Action: Sendable, Equatable {
        case write
        /// The draft's address is watched by the named source already.
        case alreadyWatched(by: String)
    }

    package var action: Action
    /// The source name (the file name without `.toml`).
    package var name: String
    /// `plugins_dir/NAME.toml`.
    package var path: String
    /// The file's text.
    package var text: String
    /// Secret files to create (0600): the full path and the value (nil: the file holds the
    /// shipped examples' placeholder, `CHANGE-ME-…`, the source is written disabled, and its
    /// comment says which file to fill in).
    package var secretFiles: [SecretFile]

    package struct SecretFile: Sendable, Equatable {
        package var option: String
        package var path: String
        package var value: String?
    }
}

/// Why nothing was written.
package struct SourceWriteError: Error, Sendable, Equatable, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Writes drafts into one `plugins_dir`, knowing the sources configured already.
package struct SourceFileWriter: Sendable {
    package let pluginsDir: String
    /// Names and addresses configured now; each write adds its own, so a batch (an import) never
    /// gives two drafts the same name or writes one address twice.
    package private(set) var inventory: SourceInventory

    /// The folder of secret files, relative to `plugins_dir` (a `KEY_file` path in a plugin
    /// resolves against `plugins_dir`; this folder is not scanned for sources).
    package static let secretsFolder = "secrets"
    /// A name longer than this is cut (before a `-2` suffix).
    static let maximumNameLength = 48

    package init(pluginsDir: String, inventory: SourceInventory) {
        self.pluginsDir = pluginsDir
        self.inventory = inventory
    }

    // MARK: planning

    /// What writing `draft` would do. `exactName` (`--name`) is used as given and is an error
    /// when taken; otherwise the draft's name is made safe and, when taken, numbered (`-2`, …).
    package func plan(_ draft: SourceDraft, exactName: Bool = false) throws(SourceWriteError) -> SourcePlan {
        let name: String
        if exactName {
            guard Self.isValidName(draft.name) else {
                throw SourceWriteError("source name \"\(draft.name)\" may use only letters, digits, '.', '_' and '-', starting with a letter or digit")
            }
            guard !isTaken(draft.name) else {
                throw SourceWriteError("a source named \"\(draft.name)\" exists already (\(inventory.origin(of: draft.name) ?? PathText.appending(draft.name + ".toml", to: pluginsDir))); choose another --name")
            }
            name = draft.name
        } else {
            name = uniqueName(Self.safeName(draft.name, fallback: draft.provider))
        }
        let path = PathText.appending(name + ".toml", to: pluginsDir)
        let secrets = draft.secrets.map { s in
            SourcePlan.SecretFile(
                option: s.option, path: PathText.appending("\(Self.secretsFolder)/\(name).\(s.option)", to: pluginsDir), value: s.value)
        }
        let text = Self.render(draft, name: name)
        if let url = draft.watchedURL, let owner = inventory.watcher(of: url) {
            return SourcePlan(action: .alreadyWatched(by: owner), name: name, path: path, text: text, secretFiles: [])
        }
        return SourcePlan(action: .write, name: name, path: path, text: text, secretFiles: secrets)
    }

    /// Whether a source (main file or plugins_dir) or a file in plugins_dir has this name.
    package func isTaken(_ name: String) -> Bool {
        if inventory.names.contains(name) { return true }
        var st = stat()
        let base = PathText.appending(name, to: pluginsDir)
        return lstat(base + ".toml", &st) == 0 || lstat(base, &st) == 0
    }

    /// `base`, else `base-2`, `base-3`, … whichever is free first.
    func uniqueName(_ base: String) -> String {
        if !isTaken(base) { return base }
        var n = 2
        while isTaken("\(base)-\(n)") { n += 1 }
        return "\(base)-\(n)"
    }

    // MARK: writing

    /// Writes what `plan` says (nothing for ``SourcePlan/Action/alreadyWatched(by:)``): the secret
    /// files first (0600, in a 0700 folder), then the source file (0644, or 0600 when it holds
    /// a secret), created under a temporary name and linked into place, so that a daemon never
    /// reads half a file and an existing file is never replaced. On failure nothing is left
    /// but a folder it made (plugins.d, 0755; its secrets folder).
    package mutating func write(_ plan: SourcePlan) throws(SourceWriteError) {
        guard plan.action == .write else { return }
        if isTaken(plan.name) {
            throw SourceWriteError("a source named \"\(plan.name)\" exists already; not overwriting \(plan.path)")
        }
        var created: [String] = []
        func undo() { for p in created.reversed() { unlink(p) } }
        try Self.makeFolder(pluginsDir, mode: 0o755)
        let owner = Self.owner(for: pluginsDir)
        let secretsDir = PathText.appending(Self.secretsFolder, to: pluginsDir)
        if !plan.secretFiles.isEmpty {
            try Self.makeFolder(secretsDir, mode: 0o700, owner: owner)
        }
        for secret in plan.secretFiles {
            do {
                let value = secret.value ?? "CHANGE-ME-\(plan.name)-\(secret.option)"
                try Self.createFile(secret.path, contents: value + "\n", mode: 0o600, owner: owner)
                created.append(secret.path)
            } catch {
                undo()
                throw error
            }
        }
        do {
            try Self.createFile(plan.path, contents: plan.text, mode: Self.holdsInlineSecret(plan.text) ? 0o600 : 0o644, owner: owner)
        } catch {
            undo()
            throw error
        }
        inventory.add(name: plan.name, origin: plan.path, watched: nil)
        if let url = Self.watchedURL(inText: plan.text) { inventory.add(name: plan.name, origin: plan.path, watched: url) }
    }

    /// Who the written files belong to: root writing into a folder another user owns (`sudo
    /// tidings add --config ~me/…`) gives them to that user, whose daemon must read them (the
    /// file-trust rules accept the running user or root as owner); otherwise whoever runs.
    static func owner(for folder: String) -> (uid: uid_t, gid: gid_t)? {
        var st = stat()
        guard getuid() == 0, stat(folder, &st) == 0, st.st_uid != 0 else { return nil }
        return (st.st_uid, st.st_gid)
    }

    /// `mkdir -p` with the last folder made exactly `mode` (not less the umask: a group-writable
    /// plugins.d would be refused); an existing folder is left as it is.
    static func makeFolder(_ path: String, mode: mode_t, owner: (uid: uid_t, gid: gid_t)? = nil) throws(SourceWriteError) {
        var st = stat()
        if stat(path, &st) == 0 { return }
        if let failure = makeDirectories(path, mode: mode) {
            throw SourceWriteError("cannot create \(failure.path): \(String(cString: strerror(failure.errno)))")
        }
        chmod(path, mode)
        if let owner { chown(path, owner.uid, owner.gid) }
    }

    /// Creates `path` with `contents` and exactly `mode` (and `owner`): written to a hidden
    /// temporary file in the same folder, synced, then hard-linked to `path` (which fails when
    /// `path` exists, unlike rename) and the temporary name removed.
    static func createFile(_ path: String, contents: String, mode: mode_t, owner: (uid: uid_t, gid: gid_t)? = nil) throws(SourceWriteError) {
        let dir = PathText.parent(path)
        let temp = PathText.appending(".\(PathText.lastComponent(path)).\(getpid()).tmp", to: dir)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SourceWriteError("cannot create \(path): \(String(cString: strerror(errno)))") }
        let bytes = Array(contents.utf8)
        var done = 0
        var ok = fchmod(fd, mode) == 0 && (owner.map { fchown(fd, $0.uid, $0.gid) == 0 } ?? true)
        while ok, done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n <= 0 { ok = false } else { done += n }
        }
        if ok { ok = fsync(fd) == 0 }
        let failure = errno
        if close(fd) != 0 || !ok {
            let why = String(cString: strerror(ok ? errno : failure))
            unlink(temp)
            throw SourceWriteError("cannot write \(path): \(why)")
        }
        if link(temp, path) != 0 {
            let why = errno == EEXIST ? "it exists; not overwriting it" : String(cString: strerror(errno))
            unlink(temp)
            throw SourceWriteError("cannot create \(path): \(why)")
        }
        unlink(temp)
    }

    // MARK: text

    /// The file for `draft` under `name`: the draft's comments, `provider`, each option (its
    /// comment above it), then each secret as `KEY_file`.
    package static func render(_ draft: SourceDraft, name: String) -> String {
        var lines: [String] = []
        func comment(_ text: String) {
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                lines.append(line.isEmpty ? "#" : "# \(line)")
            }
        }
        for c in draft.comments { comment(c) }
        comment("Check it after editing: tidings config check --poll \(name)")
        let unfilled = draft.secrets.filter { $0.value == nil }
        var options = draft.options
        if !unfilled.isEmpty, !options.contains(where: { $0.key == "enabled" }) {
            let files = unfilled.map { "\(secretsFolder)/\(name).\($0.option)" }.joined(separator: ", ")
            options.insert(
                SourceOption(
                    "enabled", .boolean(false),
                    comment: "Put the secret in \(files) (one line, in place of CHANGE-ME…), then set enabled = true."),
                at: 0)
        }
        lines.append("provider = \(basicString(draft.provider))")
        for option in options {
            if let c = option.comment { comment(c) }
            lines.append("\(key(option.key)) = \(value(option.value))")
        }
        for secret in draft.secrets {
            comment("The \(secret.option) is read from this file (mode 600): never write it in this one.")
            lines.append("\(key(secret.option + "_file")) = \(basicString("\(secretsFolder)/\(name).\(secret.option)"))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A TOML key: bare when it can be, else a basic string.
    package static func key(_ k: String) -> String {
        let bare = !k.isEmpty && k.utf8.allSatisfy { b in
            (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == 95 || b == 45
        }
        return bare ? k : basicString(k)
    }

    package static func value(_ v: DraftValue) -> String {
        switch v {
        case .string(let s): return basicString(s)
        case .integer(let i): return String(i)
        case .boolean(let b): return b ? "true" : "false"
        case .strings(let list):
            let items = list.map(basicString)
            let oneLine = "[" + items.joined(separator: ", ") + "]"
            if oneLine.count <= 80 { return oneLine }
            return "[\n" + items.map { "  \($0),\n" }.joined() + "]"
        case .table(let pairs):
            if pairs.isEmpty { return "{}" }
            return "{ " + pairs.map { "\(key($0.0)) = \(basicString($0.1))" }.joined(separator: ", ") + " }"
        }
    }

    /// `s` as a TOML basic string: `"` and `\` escaped, control characters (and DEL) as
    /// `\b \t \n \f \r` or `\uXXXX`; everything else as it is (TOML files are UTF-8).
    /// Not `Secret.jsonEscaped`: TOML also wants DEL escaped, which JSON leaves raw.
    package static func basicString(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\u{08}": out += "\\b"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\u{0C}": out += "\\f"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// Whether a written line carries a password in a URL (`scheme://user:pass@`): a reader
    /// should have made it a secret; if one did not, the file is 0600 (as the loader wants).
    static func holdsInlineSecret(_ text: String) -> Bool {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let scheme = line.firstRange(of: "://") else { continue }
            let rest = line[scheme.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "\"" && $0 != "?" && $0 != "#" }
            if let at = authority.lastIndex(of: "@"), authority[..<at].contains(":" as Character) { return true }
        }
        return false
    }

    /// The `url = "…"` of a rendered file (for the inventory after a write).
    static func watchedURL(inText text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("url = \"") && line.hasSuffix("\"") {
            let body = line.dropFirst(7).dropLast()
            if !body.contains("\\" as Character) { return String(body) }
        }
        return nil
    }

    // MARK: names

    /// A name the loader takes for a source.
    package static func isValidName(_ name: String) -> Bool { ConfigLoader.isValidSourceName(name) }

    /// A wished name made safe: lower case, runs of anything but `a-z 0-9 . _` one `-`, no
    /// leading or trailing `-`, `.` or `_`, at most 48 characters; `fallback` (the provider)
    /// when nothing is left.
    package static func safeName(_ wished: String, fallback: String) -> String {
        var out: [UInt8] = []
        var dash = false
        for b in wished.lowercased().utf8 {
            let keep = (b >= 48 && b <= 57) || (b >= 97 && b <= 122) || b == 46 || b == 95
            if keep {
                if dash, !out.isEmpty { out.append(45) }
                dash = false
                out.append(b)
            } else {
                dash = true
            }
            if out.count >= maximumNameLength { break }
        }
        func edge(_ b: UInt8) -> Bool { b == 45 || b == 46 || b == 95 }
        while let l = out.last, edge(l) { out.removeLast() }
        while let f = out.first, edge(f) { out.removeFirst() }
        // ".." inside a name is harmless in a file name, but a name of dots only is not one.
        let name = String(decoding: out, as: UTF8.self)
        if name.isEmpty || !isValidName(name) {
            return fallback == wished ? "source" : safeName(fallback, fallback: "source")
        }
        return name
    }

    /// A name for an address: its host without `www.`, and the path's words that say more than
    /// "feed" (`https://www.example.org/blog/atom.xml` → `example.org-blog`).
    package static func name(forURL url: String) -> String {
        guard let parts = WatchedAddress.parse(url) else { return url }
        var host = parts.host
        if host.hasPrefix("www.") { host = String(host.dropFirst(4)) }
        let generic: Set<String> = ["feed", "feeds", "rss", "atom", "index", "xml", "json", "rss2", "blog.xml", "feed.json", "releases"]
        var words: [String] = []
        for segment in parts.path.split(separator: "/") {
            var w = String(segment).lowercased()
            for ext in [".xml", ".rss", ".atom", ".json", ".html", ".htm", ".php"] where w.hasSuffix(ext) {
                w = String(w.dropLast(ext.count))
            }
            if !w.isEmpty, !generic.contains(w) { words.append(w) }
        }
        return safeName(([host] + words.prefix(3)).joined(separator: "-"), fallback: host)
    }
}

/// The sources configured now, as far as adding one needs to know: their names (and where each
/// is defined) and the addresses they watch, normalised (``WatchedAddress/normalised(_:)``).
package struct SourceInventory: Sendable {
    package private(set) var names: Set<String> = []
    /// Name → the file defining it.
    private var origins: [String: String] = [:]
    /// Normalised address → the first source watching it.
    private var watched: [String: String] = [:]

    package init() {}

    package mutating func add(name: String, origin: String, watched url: String?) {
        names.insert(name)
        if origins[name] == nil { origins[name] = origin }
        if let url, let n = WatchedAddress.normalised(url), watched[n] == nil { watched[n] = name }
    }

    package func origin(of name: String) -> String? { origins[name] }

    /// The source watching `url` already (same address once normalised), if any.
    package func watcher(of url: String) -> String? {
        WatchedAddress.normalised(url).flatMap { watched[$0] }
    }

    /// Reads the main file's `[sources.NAME]` tables and `plugins_dir` (each `NAME.toml`, and
    /// each executable that is a source by itself) without validating them: a file that does
    /// not parse still takes its name. `plugins_dir` missing is an empty one.
    package static func read(configFile: String, pluginsDir: String) -> SourceInventory {
        var inventory = SourceInventory()
        if let text = readText(configFile), let root = try? ConfigTable.parse(text, file: configFile),
            case .table(let sources)? = root["sources"]?.value
        {
            for name in sources.keys {
                guard case .table(let t)? = sources[name]?.value else { continue }
                let origin = t.line.map { "\(configFile):\($0)" } ?? configFile
                inventory.add(name: name, origin: origin, watched: nil)
                for url in addresses(of: t, in: PathText.parent(configFile)) { inventory.add(name: name, origin: origin, watched: url) }
            }
        }
        guard let dir = opendir(pluginsDir) else { return inventory }
        var entries: [String] = []
        while let e = readdir(dir) {
            let n = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if !n.hasPrefix(".") { entries.append(n) }
        }
        closedir(dir)
        for entry in entries.sorted() {
            let path = PathText.appending(entry, to: pluginsDir)
            if entry.hasSuffix(".toml") {
                let name = String(entry.dropLast(5))
                inventory.add(name: name, origin: path, watched: nil)
                if let text = readText(path), let t = try? ConfigTable.parse(text, file: path) {
                    for url in addresses(of: t, in: pluginsDir) { inventory.add(name: name, origin: path, watched: url) }
                }
            } else if access(path, X_OK) == 0, entry != SourceFileWriter.secretsFolder {
                var st = stat()
                if stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG { inventory.add(name: entry, origin: path, watched: nil) }
            }
        }
        return inventory
    }

    /// The addresses a source table watches: `url` (with `username` for imap), or the one its
    /// `url_file` holds (a path relative to `directory`, the defining file's; read to compare,
    /// never shown), a github `repo`'s page, each certificate target.
    static func addresses(of t: ConfigTable, in directory: String) -> [String] {
        func string(_ k: String) -> String? { if case .string(let s)? = t[k]?.value { s } else { nil } }
        var out: [String] = []
        let provider = string("provider")
        var secretURL: String?
        if string("url") == nil, let file = string("url_file") {
            let expanded = PathResolver.expandTilde(file)
            let path = expanded.hasPrefix("/") ? expanded : PathText.appending(expanded, to: directory)
            secretURL = readText(path)?.trimmed(newlines: true)
        }
        if var url = string("url") ?? secretURL {
            if provider == "imap", let user = string("username"), let r = url.firstRange(of: "://") {
                url = String(url[..<r.upperBound]) + WatchedAddress.percentEncodedUser(user) + "@" + url[r.upperBound...]
            }
            out.append(url)
        }
        if provider == "github", let repo = string("repo") { out.append("https://github.com/\(repo)") }
        if provider == "certificate", case .array(let targets)? = t["targets"]?.value {
            for node in targets {
                if case .string(let s) = node.value { out.append(WatchedAddress.certificateTarget(s)) }
            }
        }
        return out
    }

    /// A file's text (at most 16 MiB), nil when it cannot be read.
    package static func readText(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { return nil }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > 16 << 20 { return nil }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// An address taken apart as far as comparing two needs: `scheme://[user@]host[:port]/path[?query]`.
package struct WatchedAddress: Sendable, Equatable {
    package var scheme: String
    package var user: String?
    package var host: String
    package var port: Int?
    package var path: String
    package var query: String?

    static let defaultPorts: [String: Int] = [
        "http": 80, "https": 443, "imap": 143, "imaps": 993, "smtp": 25, "smtps": 465, "ftp": 21,
    ]

    /// Splits an absolute address; nil when it has no `scheme://host`.
    package static func parse(_ text: String) -> WatchedAddress? {
        let s = Substring(text.trimmed(newlines: true))
        guard let sep = s.firstRange(of: "://"), !s[..<sep.lowerBound].isEmpty else { return nil }
        let scheme = s[..<sep.lowerBound].lowercased()
        var rest = s[sep.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        let tail = rest[authorityEnd...]
        var user: String? = nil
        if let at = authority.lastIndex(of: "@") {
            let info = authority[..<at]
            user = String(info.prefix { $0 != ":" })
            authority = authority[authority.index(after: at)...]
        }
        var host = Substring(authority)
        var port: Int? = nil
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") { port = Int(after.dropFirst()) }
            host = host[...close]
        } else if let colon = host.lastIndex(of: ":") {
            let p = host[host.index(after: colon)...]
            if !p.isEmpty {
                guard let n = Int(p) else { return nil }
                port = n
            }
            host = host[..<colon]
        }
        guard !host.isEmpty else { return nil }
        var path = Substring(tail)
        var query: String? = nil
        if let q = path.firstIndex(of: "?") {
            query = String(path[path.index(after: q)...])
            path = path[..<q]
        }
        return WatchedAddress(scheme: scheme, user: user, host: host.lowercased(), port: port, path: String(path), query: query)
    }

    /// The form two addresses are compared in: scheme and host in lower case, no default port,
    /// no fragment or password, the path without a trailing `/` (an empty one is `/`).
    package static func normalised(_ text: String) -> String? {
        guard let a = parse(text) else { return nil }
        var out = a.scheme + "://"
        if let user = a.user, !user.isEmpty { out += user + "@" }
        out += a.host
        if let port = a.port, port != defaultPorts[a.scheme] { out += ":\(port)" }
        var path = a.path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        if path.isEmpty { path = "/" }
        out += path
        if let q = a.query, !q.isEmpty { out += "?" + q }
        return out
    }

    /// A certificate target (`host`, `host:port`, `smtp://host`) as an address.
    package static func certificateTarget(_ target: String) -> String {
        target.firstRange(of: "://") != nil ? target : "https://" + target
    }

    /// A user name as it stands before `@` in an address.
    package static func percentEncodedUser(_ user: String) -> String {
        var out = ""
        for b in user.utf8 {
            let plain = (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == 45 || b == 46 || b == 95 || b == 126
            if plain { out.unicodeScalars.append(Unicode.Scalar(b)) } else {
                let hex = String(b, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out
    }
}
