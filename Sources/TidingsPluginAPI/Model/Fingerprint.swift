import FoundationEssentials
import TidingsCrypto

/// Short stable content hashes for change detection.
package enum Fingerprint {
    /// SHA-256 over the parts (length-prefixed so `["ab","c"]` ≠ `["a","bc"]`), first 16 hex digits.
    package static func of(_ parts: [String]) -> String {
        var hasher = SHA256.Hasher()
        for p in parts {
            let bytes = Array(p.utf8)
            let n = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: n) { hasher.update($0) }
            hasher.update(bytes)
        }
        return hexString(hasher.finalize().prefix(8))
    }
}
