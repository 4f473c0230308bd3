#if canImport(Glibc)
import Glibc
#endif

/// A failed system call, said as "what: strerror(errno)".
package struct SystemFailure: Error, CustomStringConvertible, Sendable {
    package var description: String

    package init(_ what: String, errno code: Int32) { description = "\(what): \(String(cString: strerror(code)))" }
    package init(_ what: String) { description = what }
}
