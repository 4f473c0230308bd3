import TidingsPluginAPI

/// Text for stdout and stderr, written with write(2) (Foundation's `FileHandle.standardOutput`
/// belongs to corelibs Foundation).
package enum StandardStreams {
    /// All of `text` to `fd`: short writes continued, EINTR retried. False on a write error (a
    /// closed pipe, a full disk): the rest is dropped, as there is nowhere left to say so.
    @discardableResult
    package static func write(_ text: String, to fd: Int32) -> Bool {
        writeAll(fd, Array(text.utf8))
    }
}
