import FoundationEssentials
import Glibc

/// sshd's `StrictModes` for the files tidings acts on: the main config, `plugins_dir` and every
/// plugin in it, exec commands, and the state directory. Anyone who can change one of them can
/// make tidings run code of their choosing, as the user it runs as (often root).
///
/// A file is trusted when it is owned by the running user or root and no one else can write
/// it, and when every directory above it, up to `/`, is the same: owned by the running user or
/// root, and writable by no one else, unless the directory is sticky (like `/tmp`, where others
/// may create entries but not rename or remove ours). A directory tidings takes every entry of
/// (`plugins_dir`, the state directory) must not be writable by others at all, sticky or not:
/// they could add entries.
///
/// Symbolic links are resolved first and the real path is checked, as sshd does.
package struct FileTrust: Sendable {
    /// What a path is to tidings, for messages.
    package enum Role: String, Sendable {
        case config = "config file"
        case pluginConfig = "plugin config"
        case plugin = "plugin"
        case pluginsDirectory = "plugins directory"
        case command = "command"
        case secretFile = "secret file"
        case stateDirectory = "state directory"
        case database = "state database"
    }

    /// One refusal: the path at fault and what to do about it.
    package struct Problem: Sendable, Equatable, CustomStringConvertible {
        package var path: String
        /// What is wrong and the fix; does not repeat `path` at the start.
        package var message: String
        package var description: String { "\(path): \(message)" }
        /// Located at the path itself (a file with no line: the file's metadata is at fault).
        package var configError: ConfigError { ConfigError(file: path, line: nil, message) }
        package init(path: String, message: String) {
            self.path = path
            self.message = message
        }
    }

    /// The effective user tidings runs as.
    package let user: uid_t

    package init(user: uid_t = geteuid()) {
        self.user = user
    }

    /// `path` and every directory above it, up to `/` or a directory in `vouched` (real paths
    /// checked already). `path` itself may not be writable by others even when it is a sticky
    /// directory: tidings takes what is in it.
    package func check(_ path: String, as role: Role, stopAt vouched: Set<String> = []) -> [Problem] {
        guard let real = Self.realPath(path) else { return [] }  // a missing file is reported by whoever reads it
        return checkEntry(real, as: role) + ancestors(of: real, stopAt: vouched)
    }

    /// Only `path` itself (its directory was checked already): owner and mode.
    package func checkEntry(_ path: String, as role: Role) -> [Problem] {
        var st = stat()
        guard stat(path, &st) == 0 else { return [] }
        return checkEntry(path, status: st, as: role)
    }

    /// Only `path` itself, from its status taken already (`fstat` of the descriptor it is read
    /// through: the file checked is the file read, with no second lookup of the path).
    package func checkEntry(_ path: String, status st: stat, as role: Role) -> [Problem] {
        var problems: [Problem] = []
        if let owner = untrustedOwner(st) {
            problems.append(
                Problem(path: path, message: "\(role.rawValue) is owned by \(owner), not by \(trustedOwners): chown \(Self.name(of: user)) \(path)"))
        }
        if st.st_mode & 0o022 != 0 {
            let fix = role == .stateDirectory ? "chmod 700" : "chmod go-w"
            problems.append(Problem(path: path, message: "\(role.rawValue) is writable by group or others (mode \(Self.octal(st.st_mode))): \(fix) \(path)"))
        }
        return problems
    }

    /// Whether ``checkEntry(_:status:as:)`` would find nothing wrong with a file of this status
    /// (no message made: the common case of 10,000 plugin files).
    package func trusts(_ st: stat) -> Bool {
        (st.st_uid == user || st.st_uid == 0) && st.st_mode & 0o022 == 0
    }

    /// The directories above `real`, up to `/` or a directory in `vouched`.
    private func ancestors(of real: String, stopAt vouched: Set<String>) -> [Problem] {
        var problems: [Problem] = []
        var dir = PathText.parent(real)
        while !dir.isEmpty && !vouched.contains(dir) {
            var st = stat()
            if stat(dir, &st) == 0 {
                if let owner = untrustedOwner(st) {
                    problems.append(
                        Problem(
                            path: dir,
                            message:
                                "directory is owned by \(owner), not by \(trustedOwners), so they could replace what tidings reads below it: chown \(Self.name(of: user)) \(dir)"
                        ))
                }
                if st.st_mode & 0o022 != 0 && st.st_mode & S_ISVTX == 0 {
                    problems.append(
                        Problem(
                            path: dir,
                            message:
                                "directory is writable by group or others (mode \(Self.octal(st.st_mode))), so they could replace what tidings reads below it: chmod go-w \(dir)"
                        ))
                }
            }
            if dir == "/" { break }
            dir = PathText.parent(dir)
        }
        return problems
    }

    private func untrustedOwner(_ st: stat) -> String? {
        st.st_uid == user || st.st_uid == 0 ? nil : "\(Self.name(of: st.st_uid)) (uid \(st.st_uid))"
    }

    private var trustedOwners: String {
        user == 0 ? "root (the running user)" : "\(Self.name(of: user)) (the running user) or root"
    }

    static func octal(_ mode: mode_t) -> String { String(mode & 0o7777, radix: 8) }

    /// The real path (symbolic links resolved), or nil if it does not exist.
    package static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    /// The user name of `uid` (thread-safe: plugin files are checked in parallel), or `uid N`.
    static func name(of uid: uid_t) -> String {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return "uid \(uid)"
        }
        return String(cString: name)
    }
}
