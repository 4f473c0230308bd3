import CLibCrypto

// HMAC-SHA256, constant-time comparison and random bytes from OpenSSL's libcrypto (DESIGN §15:
// one crypto stack, the one libcurl already loads), loaded at the first call: a run that signs
// no webhook and serves no status page never maps it. Bytes in, bytes out: nothing above this
// file sees a C pointer. A user of it calls ``libcryptoUnavailable()`` where a missing library
// can be reported (a config error, a failed start); after that, a failure of libcrypto itself
// (missing, no SHA-256 in the default provider, no entropy) stops the process: there is no safe
// value to go on with. SHA-256 alone is SHA256.swift's.

/// Loads libcrypto (once per process): nil, or why it cannot be (the soname and the Debian
/// package to install).
package func libcryptoUnavailable() -> String? {
    tidings_crypto_load().map { String(cString: $0) }
}

/// HMAC-SHA256 (RFC 2104, FIPS 198-1).
package enum HMACSHA256 {
    /// The MAC of `message` under `key` (32 bytes).
    package static func authenticationCode(for message: some Sequence<UInt8>, key: some Sequence<UInt8>) -> [UInt8] {
        requireLibcrypto()
        var out = [UInt8](repeating: 0, count: SHA256.byteCount)
        // HMAC() takes a null key as "no key given": an empty key is a pointer to no bytes.
        let keyBytes = Array(key)
        guard keyBytes.count <= Int32.max else { preconditionFailure("HMAC key of \(keyBytes.count) bytes") }
        let result = withContiguousBytes(keyBytes) { k, kn in
            withContiguousBytes(message) { m, n in
                out.withUnsafeMutableBufferPointer { o in
                    tidings_hmac_sha256(k, Int32(kn), m.assumingMemoryBound(to: UInt8.self), n, o.baseAddress)
                }
            }
        }
        guard result == 1 else { libcryptoFailed("HMAC") }
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
    requireLibcrypto()
    return a.withUnsafeBytes { x in b.withUnsafeBytes { y in tidings_CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
}

/// `count` bytes from OpenSSL's CSPRNG (RAND_bytes). Never a weak value: if the generator
/// cannot give them, the process stops.
package func secureRandomBytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    guard count > 0 else { return out }
    requireLibcrypto()
    let ok = out.withUnsafeMutableBufferPointer { tidings_RAND_bytes($0.baseAddress, Int32($0.count)) }
    guard ok == 1 else { fatalError("OpenSSL RAND_bytes failed: no secure random bytes (error \(tidings_ERR_get_error()))") }
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
    fatalError("OpenSSL libcrypto: \(call) failed (error \(tidings_ERR_get_error()))")
}

/// Loads libcrypto, or stops the process saying why (the caller did not ask
/// ``libcryptoUnavailable()`` where it could report it).
private func requireLibcrypto() {
    if let missing = libcryptoUnavailable() { fatalError("OpenSSL libcrypto: \(missing)") }
}
