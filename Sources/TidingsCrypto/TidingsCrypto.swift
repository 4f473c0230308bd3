import CLibCrypto

// SHA-256, HMAC-SHA256, constant-time comparison and random bytes from OpenSSL's libcrypto
// (DESIGN §15: one crypto stack, the one libcurl already loads). Bytes in, bytes out: nothing
// above this file sees a C pointer. A failure of libcrypto itself (no SHA-256 in the default
// provider, no entropy) stops the process: there is no safe value to go on with.

/// SHA-256 (FIPS 180-4).
package enum SHA256 {
    /// The length of a digest in bytes.
    package static let byteCount = 32

    /// The digest of `bytes`.
    package static func hash(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hasher = Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// An incremental SHA-256: `update` any number of times, then `finalize` once.
    package struct Hasher: ~Copyable {
        private let context: OpaquePointer

        package init() {
            guard let context = EVP_MD_CTX_new() else { libcryptoFailed("EVP_MD_CTX_new") }
            guard EVP_DigestInit_ex(context, sha256, nil) == 1 else { libcryptoFailed("EVP_DigestInit_ex") }
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        package mutating func update(_ bytes: some Sequence<UInt8>) {
            withContiguousBytes(bytes) { p, n in
                guard EVP_DigestUpdate(context, p, n) == 1 else { libcryptoFailed("EVP_DigestUpdate") }
            }
        }

        /// The digest of everything given to `update`.
        package consuming func finalize() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: SHA256.byteCount)
            var length: UInt32 = 0
            let ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
            guard ok == 1, length == SHA256.byteCount else { libcryptoFailed("EVP_DigestFinal_ex") }
            return out
        }
    }
}

/// HMAC-SHA256 (RFC 2104, FIPS 198-1).
package enum HMACSHA256 {
    /// The MAC of `message` under `key` (32 bytes).
    package static func authenticationCode(for message: some Sequence<UInt8>, key: some Sequence<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length: UInt32 = 0
        // HMAC() takes a null key as "no key given": an empty key is a pointer to no bytes.
        let keyBytes = Array(key)
        guard keyBytes.count <= Int32.max else { preconditionFailure("HMAC key of \(keyBytes.count) bytes") }
        let result = withContiguousBytes(keyBytes) { k, kn in
            withContiguousBytes(message) { m, n in
                out.withUnsafeMutableBufferPointer { o in
                    HMAC(sha256, k, Int32(kn), m.assumingMemoryBound(to: UInt8.self), n, o.baseAddress, &length)
                }
            }
        }
        guard result != nil, length == SHA256.byteCount else { libcryptoFailed("HMAC") }
        return out
    }

    /// Whether `mac` is the MAC of `message` under `key`, compared in constant time.
    package static func isValid(_ mac: some Sequence<UInt8>, for message: some Sequence<UInt8>, key: some Sequence<UInt8>) -> Bool {
        constantTimeEqual(Array(mac), authenticationCode(for: message, key: key))
    }
}

/// Whether `a` and `b` hold the same bytes, in time that depends on their length only
/// (CRYPTO_memcmp). Different lengths are unequal (the length is not secret).
package func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
}

/// `count` bytes from OpenSSL's CSPRNG (RAND_bytes). Never a weak value: if the generator
/// cannot give them, the process stops.
package func secureRandomBytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    guard count > 0 else { return out }
    let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
    guard ok == 1 else { fatalError("OpenSSL RAND_bytes failed: no secure random bytes (error \(ERR_get_error()))") }
    return out
}

/// Lower-case hex, two digits a byte (what `%02x` per byte gives, without `String(format:)`).
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.underestimatedCount * 2)
    for b in bytes {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}

private let hexDigits = Array("0123456789abcdef".utf8)

/// SHA-256 of the default provider, fetched once: an `EVP_sha256()` handed to every call
/// would make OpenSSL 3 look the implementation up again each time.
nonisolated(unsafe) private let sha256: OpaquePointer = {
    guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { libcryptoFailed("EVP_MD_fetch(SHA256)") }
    return md
}()

/// Calls `body` with the bytes of `bytes` in one buffer (theirs if they have one, else a copy);
/// never a null pointer, even for no bytes.
private func withContiguousBytes<R>(_ bytes: some Sequence<UInt8>, _ body: (UnsafeRawPointer, Int) -> R) -> R {
    func call(_ buffer: UnsafeBufferPointer<UInt8>) -> R {
        guard let base = buffer.baseAddress else { return withUnsafePointer(to: UInt8(0)) { body($0, 0) } }
        return body(base, buffer.count)
    }
    if let r = bytes.withContiguousStorageIfAvailable(call) { return r }
    return Array(bytes).withUnsafeBufferPointer(call)
}

private func libcryptoFailed(_ call: String) -> Never {
    fatalError("OpenSSL libcrypto: \(call) failed (error \(ERR_get_error()))")
}
