import Glibc

/// Text for stdout and stderr, written with write(2) (Foundation's `FileHandle.standardOutput`
/// belongs to corelibs Foundation).
package enum StandardStreams {
    /// All of `text` to `fd`: short writes continued, EINTR retried. False on a write error (a
    /// closed pipe, a full disk): the rest is dropped, as there is nowhere left to say so.
    @discardableResult
    package static func write(_ text: String, to fd: Int32) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}
