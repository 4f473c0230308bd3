import Glibc

/// The bytes of `fd` from its offset to the end of the file, at most `limit` (EINTR retried):
/// what Foundation's `FileHandle.read(upToCount:)` gave. Nil on a read error (errno says which).
package func readBytes(_ fd: Int32, upTo limit: Int) -> [UInt8]? {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16_384)
    while out.count < limit {
        let want = min(buffer.count, limit - out.count)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, want) }
        if n < 0 && errno == EINTR { continue }
        guard n >= 0 else { return nil }
        if n == 0 { break }
        out.append(contentsOf: buffer[0..<n])
    }
    return out
}

/// All of `bytes` written to `fd` (short writes continued, EINTR retried): what Foundation's
/// `FileHandle.write(_:)` did. False on a write error.
@discardableResult
package func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { writeAll(fd, $0) }
}

/// All of `bytes` written to `fd`, as ``writeAll(_:_:)-([UInt8])`` writes an array.
@discardableResult
package func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return false }
        offset += n
    }
    return true
}
