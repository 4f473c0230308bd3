import Crypto
import Foundation

/// Short stable content hashes for change detection.
package enum Fingerprint {
    /// SHA-256 over the parts (length-prefixed so `["ab","c"]` ≠ `["a","bc"]`), first 16 hex digits.
    package static func of(_ parts: [String]) -> String {
        var hasher = SHA256()
        for p in parts {
            let bytes = Array(p.utf8)
            var n = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: &n) { hasher.update(bufferPointer: $0) }
            hasher.update(data: bytes)
        }
        return hex(hasher.finalize().prefix(8))
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// Lower-case hex (`String(format: "%02x")` per byte costs more than the hash itself).
    static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
