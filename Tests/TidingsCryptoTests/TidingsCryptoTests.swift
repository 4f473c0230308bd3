import CLibCrypto
import XCTest

@testable import TidingsCrypto

/// Known-answer tests of the SHA-256 and the libcrypto binding: FIPS 180-2's SHA-256 examples
/// and RFC 4231's HMAC-SHA256 test cases. A wrong binding (wrong digest, key or length handed to
/// OpenSSL, a truncated output) fails them; the own SHA-256 is also compared with libcrypto's.
final class TidingsCryptoTests: XCTestCase {
    /// The own SHA-256 against libcrypto's (EVP_Digest) on every length from 0 to 300 bytes
    /// (padding into one or two final blocks, every offset of the length field) and on
    /// pseudo-random contents, one-shot and fed in pieces of every size from 1 to 70.
    func testSHA256MatchesLibcrypto() throws {
        XCTAssertNil(libcryptoUnavailable())
        func oracle(_ bytes: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            let ok = bytes.withUnsafeBytes { b in out.withUnsafeMutableBufferPointer { tidings_sha256_libcrypto(b.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, b.count, $0.baseAddress) } }
            XCTAssertEqual(ok, 1)
            return out
        }
        var state: UInt64 = 0x9e37_79b9_7f4a_7c15
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        for n in 0...300 {
            let bytes = (0..<n).map { _ in next() }
            let wanted = oracle(bytes)
            XCTAssertEqual(SHA256.hash(bytes), wanted, "\(n) bytes")
            let piece = n % 70 + 1
            var hasher = SHA256.Hasher()
            for start in stride(from: 0, to: n, by: piece) { hasher.update(bytes[start..<min(start + piece, n)]) }
            let fed = hasher.finalize()
            XCTAssertEqual(fed, wanted, "\(n) bytes in pieces of \(piece)")
        }
    }

    func testSHA256KnownAnswers() {
        XCTAssertEqual(hexString(SHA256.hash("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hexString(SHA256.hash([UInt8]())), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(
            hexString(SHA256.hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        XCTAssertEqual(hexString(SHA256.hash(million)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        // A sequence without contiguous storage goes through the copy.
        XCTAssertEqual(hexString(SHA256.hash("abc".utf8.lazy.map { $0 })), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// The incremental hasher over uneven pieces (some empty, some across the 64-byte block)
    /// gives the one-shot digest.
    func testIncrementalSHA256MatchesOneShot() {
        var hasher = SHA256.Hasher()
        var fed = 0
        for size in [0, 1, 63, 64, 65, 0, 1000, 127, 998_680] {
            hasher.update([UInt8](repeating: UInt8(ascii: "a"), count: size))
            fed += size
        }
        XCTAssertEqual(fed, 1_000_000)
        let digest = hasher.finalize()
        XCTAssertEqual(hexString(digest), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        XCTAssertEqual(hexString(SHA256.Hasher().finalize()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// RFC 4231 §4.2–4.8 (test case 5 is compared on its first 128 bits, as the RFC does).
    func testHMACSHA256RFC4231() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
             "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
             "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (Array(1...25), [UInt8](repeating: 0xcd, count: 50),
             "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            ([UInt8](repeating: 0x0c, count: 20), Array("Test With Truncation".utf8),
             "a3b6167473100ee06e0c796c2955552b"),
            ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            ([UInt8](repeating: 0xaa, count: 131),
             Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
             "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ]
        for (n, c) in cases.enumerated() {
            let mac = HMACSHA256.authenticationCode(for: c.data, key: c.key)
            XCTAssertEqual(mac.count, 32, "case \(n + 1)")
            XCTAssertTrue(hexString(mac).hasPrefix(c.mac), "RFC 4231 case \(n + 1): \(hexString(mac))")
            XCTAssertTrue(HMACSHA256.isValid(mac, for: c.data, key: c.key), "case \(n + 1)")
            XCTAssertFalse(HMACSHA256.isValid(mac, for: c.data + [0], key: c.key), "case \(n + 1)")
            XCTAssertFalse(HMACSHA256.isValid(mac.dropLast(), for: c.data, key: c.key), "a truncated MAC, case \(n + 1)")
        }
        // An empty key and an empty message are a MAC like any other (Python's hmac agrees).
        XCTAssertEqual(
            hexString(HMACSHA256.authenticationCode(for: [UInt8](), key: [UInt8]())),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    func testConstantTimeEqual() {
        XCTAssertTrue(constantTimeEqual([], []))
        XCTAssertTrue(constantTimeEqual([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(constantTimeEqual([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(constantTimeEqual([0, 2, 3], [1, 2, 3]))
        XCTAssertFalse(constantTimeEqual([1, 2, 3], [1, 2]))
        XCTAssertFalse(constantTimeEqual([], [0]))
    }

    /// Random bytes: the length asked for, and not the same twice (2^-256 for a sound generator).
    func testSecureRandomBytes() {
        XCTAssertEqual(secureRandomBytes(0), [])
        let a = secureRandomBytes(32), b = secureRandomBytes(32)
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, b)
        XCTAssertNotEqual(a, [UInt8](repeating: 0, count: 32))
        XCTAssertEqual(secureRandomBytes(1000).count, 1000)
    }

    func testHex() {
        XCTAssertEqual(hexString([0x00, 0x0f, 0xa0, 0xff]), "000fa0ff")
        XCTAssertEqual(hexString([UInt8]()), "")
    }
}
