/// Paths as plain text split on "/", for the few places that take one apart (NSString's path
/// methods belong to corelibs Foundation). Nothing here touches the file system.
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

    private static func withoutTrailingSlashes(_ path: some StringProtocol) -> Substring {
        var end = path.endIndex
        while end > path.startIndex, path[path.index(before: end)] == "/" { end = path.index(before: end) }
        return Substring(path[..<end])
    }
}
