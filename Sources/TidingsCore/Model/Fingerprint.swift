import Crypto
import Foundation

/// Short stable content hashes for change detection.
public enum Fingerprint {
    /// SHA-256 over the parts (length-prefixed so `["ab","c"]` ≠ `["a","bc"]`), first 16 hex digits.
    public static func of(_ parts: [String]) -> String {
        var hasher = SHA256()
        for p in parts {
            let bytes = Array(p.utf8)
            var n = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: &n) { hasher.update(bufferPointer: $0) }
            hasher.update(data: bytes)
        }
        return hasher.finalize().prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}
