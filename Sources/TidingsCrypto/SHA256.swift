// SHA-256 (FIPS 180-4 §6.2) in Swift, stdlib only. Fingerprints (every item's content hash,
// every source's configuration hash) are taken in every run, `config check` included: on
// libcrypto they would map its 3.4 MiB into every process (DESIGN §15). Only SHA-256 itself is
// here; keyed MACs, constant-time compare and random bytes stay with OpenSSL
// (TidingsCrypto.swift). TidingsCryptoTests checks it against libcrypto's SHA-256 on every
// length up to several blocks.

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
        private var h0: UInt32 = 0x6a09_e667, h1: UInt32 = 0xbb67_ae85, h2: UInt32 = 0x3c6e_f372, h3: UInt32 = 0xa54f_f53a
        private var h4: UInt32 = 0x510e_527f, h5: UInt32 = 0x9b05_688c, h6: UInt32 = 0x1f83_d9ab, h7: UInt32 = 0x5be0_cd19
        /// Bytes given but not compressed yet (less than a block).
        private var pending: [UInt8] = []
        /// Bytes given so far.
        private var length: UInt64 = 0

        package init() {}

        package mutating func update(_ bytes: some Sequence<UInt8>) {
            if bytes.withContiguousStorageIfAvailable({ absorb(UnsafeRawBufferPointer($0)) }) == nil {
                Array(bytes).withUnsafeBytes { absorb($0) }
            }
        }

        /// The digest of everything given to `update`.
        package consuming func finalize() -> [UInt8] {
            // The last bytes, 0x80, zeros, and the length in bits: one block or two (§5.1.1).
            let blocks = pending.count < 56 ? 1 : 2
            let bits = length &* 8
            withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
                tail.initializeMemory(as: UInt8.self, repeating: 0)
                pending.withUnsafeBytes { tail.copyMemory(from: $0) }
                tail[pending.count] = 0x80
                tail.storeBytes(of: bits.bigEndian, toByteOffset: blocks * 64 - 8, as: UInt64.self)
                for block in 0..<blocks { compress(tail.baseAddress! + block * 64) }
            }
            let words = [h0, h1, h2, h3, h4, h5, h6, h7]
            return [UInt8](unsafeUninitializedCapacity: SHA256.byteCount) { out, count in
                for (i, word) in words.enumerated() {
                    withUnsafeBytes(of: word.bigEndian) { for j in 0..<4 { out[i * 4 + j] = $0[j] } }
                }
                count = SHA256.byteCount
            }
        }

        private mutating func absorb(_ bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            length &+= UInt64(bytes.count)
            var offset = 0
            if !pending.isEmpty {
                offset = min(64 - pending.count, bytes.count)
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<offset]))
                guard pending.count == 64 else { return }
                pending.withUnsafeBytes { compress($0.baseAddress!) }
                pending.removeAll(keepingCapacity: true)
            }
            while bytes.count - offset >= 64 {
                compress(base + offset)
                offset += 64
            }
            if offset < bytes.count { pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
        }

        /// One 64-byte block at `block` into the state (§6.2.2).
        private mutating func compress(_ block: UnsafeRawPointer) {
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                for t in 0..<16 { w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t * 4, as: UInt32.self)) }
                for t in 16..<64 {
                    let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
                    let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
                    w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                }
                var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                roundConstants.withUnsafeBufferPointer { k in
                    for t in 0..<64 {
                        let t1 = h &+ (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) &+ ((e & f) ^ (~e & g)) &+ k[t] &+ w[t]
                        let t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
                        h = g
                        g = f
                        f = e
                        e = d &+ t1
                        d = c
                        c = b
                        b = a
                        a = t1 &+ t2
                    }
                }
                h0 &+= a
                h1 &+= b
                h2 &+= c
                h3 &+= d
                h4 &+= e
                h5 &+= f
                h6 &+= g
                h7 &+= h
            }
        }
    }
}

@inline(__always) private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

/// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (§4.2.2).
private let roundConstants: [UInt32] = [
    0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
    0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
    0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
    0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
    0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
    0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
    0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
    0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
]
