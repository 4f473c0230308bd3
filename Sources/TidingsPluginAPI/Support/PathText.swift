import Glibc

/// Paths as plain text split on "/", for the few places that take one apart (NSString's path
/// methods belong to corelibs Foundation). Nothing here touches the file system but
/// ``standardized(_:)``, which reads symbolic links.
package enum PathText {
    /// The last component: "/a/b" and "/a/b/" → "b", "/" → "/", "" → "".
    package static func lastComponent(_ path: String) -> String {
        let body = withoutTrailingSlashes(path)
        if body.isEmpty { return path.isEmpty ? "" : "/" }
        guard let slash = body.lastIndex(of: "/") else { return String(body) }
        return String(body[body.index(after: slash)...])
    }

    /// The folder that holds `path`: "/a/b" → "/a", "/a" → "/", "a" → "", "/" → "/".
    package static func parent(_ path: String) -> String {
        let body = withoutTrailingSlashes(path)
        if body.isEmpty { return path.isEmpty ? "" : "/" }
        guard let slash = body.lastIndex(of: "/") else { return "" }
        let folder = withoutTrailingSlashes(body[..<slash])
        return folder.isEmpty ? "/" : String(folder)
    }

    /// `component` (a name or a relative path) under `folder`: "/srv" or "/srv/" and "x/y" →
    /// "/srv/x/y", "" and "x" → "x".
    package static func appending(_ component: String, to folder: String) -> String {
        if folder.isEmpty { return component }
        return "\(withoutTrailingSlashes(folder))/\(component)"
    }

    /// What corelibs Foundation's `NSString.standardizingPath` gave (after `~` expansion):
    /// empty and `.` components dropped, and component by component from the left, a symbolic
    /// link whose target is absolute replaced by that target (followed while it is such a link
    /// again), `..` in an absolute path taking off the last component. "/srv//a/./b/" →
    /// "/srv/a/b"; "/a/b/../c" → "/a/c" (with no links). In a relative path `..` stays. A link
    /// with a relative target stays as it is (corelibs resolved that target against the working
    /// directory, not the link's folder, and kept the link when that failed).
    package static func standardized(_ path: String) -> String {
        var parts = path.split(separator: "/").map(String.init)
        let absolute = path.hasPrefix("/")
        if parts.isEmpty { return path.isEmpty ? "" : "/" }
        var resolved = absolute ? "/" : parts.removeFirst()
        for part in parts {
            if part == "." { continue }
            if part == "..", absolute {
                resolved = parent(resolved)
                continue
            }
            resolved = appending(part, to: resolved)
            if let target = absoluteTarget(resolved) { resolved = target }
        }
        return resolved
    }

    /// Where the symbolic link `path` finally points, through links with absolute targets; nil
    /// if `path` is no link, or the chain meets a relative target or is longer than 32 links.
    private static func absoluteTarget(_ path: String) -> String? {
        var current = path
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        for _ in 0..<32 {
            let n = readlink(current, &buffer, buffer.count - 1)
            guard n > 0 else { return current == path ? nil : current }
            let target = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target.hasPrefix("/") else { return nil }
            current = target
        }
        return nil
    }

    private static func withoutTrailingSlashes(_ path: some StringProtocol) -> Substring {
        var end = path.endIndex
        while end > path.startIndex, path[path.index(before: end)] == "/" { end = path.index(before: end) }
        return Substring(path[..<end])
    }
}
