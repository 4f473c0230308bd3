import TidingsPluginAPI

#if canImport(Glibc)
    import Glibc
#endif

/// A failed system call, said as "what: strerror(errno)".
package struct SystemFailure: Error, CustomStringConvertible, Sendable {
    package var description: String
    /// The errno of the call; nil for a failure that is no system call's (a timeout, say).
    package var code: Int32?

    package init(_ what: String, errno code: Int32) {
        description = "\(what): \(String(cString: strerror(code)))"
        self.code = code
    }
    package init(_ what: String) { description = what }

    /// The peer closed the connection under this end (a write that got EPIPE, a read or write
    /// that got ECONNRESET: it hung up with bytes of ours unread).
    package var isHangUp: Bool { code == EPIPE || code == ECONNRESET }
}
