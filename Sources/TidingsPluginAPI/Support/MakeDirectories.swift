import Glibc

/// `mkdir -p`: every missing folder of `path`, the last included, made with `mode` (less the
/// umask). An existing path (a folder, or a link to one) is left as it is. Nil once all exist;
/// else the folder that could not be made and the errno of its `mkdir`.
package func makeDirectories(_ path: String, mode: mode_t) -> (path: String, errno: Int32)? {
    var st = stat()
    if path.isEmpty || stat(path, &st) == 0 { return nil }
    let parent = PathText.parent(path)
    if parent != path && !parent.isEmpty, let failure = makeDirectories(parent, mode: mode) { return failure }
    if mkdir(path, mode) != 0 && errno != EEXIST { return (path, errno) }
    return nil
}
