import XCTest

@testable import TidingsPluginAPI

/// Which addresses a redirect under `refuse_private_redirects` may not connect to (issue 30,
/// "also decide and document"): decided on the address bytes, every written form of them.
final class PrivateAddressTests: XCTestCase {
    private func isPrivate(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        guard let bytes = PrivateAddress.bytes(text) else {
            XCTFail("not an address: \(text)", file: file, line: line)
            return true
        }
        return PrivateAddress.isPrivate(bytes)
    }

    func testPrivateRanges() {
        let refused = [
            "127.0.0.1", "127.255.0.9", "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
            "192.168.1.1", "169.254.169.254", "100.64.0.1", "100.127.255.254", "192.0.0.8", "198.18.0.1", "198.19.255.1",
            "224.0.0.1", "239.1.2.3", "240.0.0.1", "255.255.255.255",
            "::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "febf::1", "fec0::1", "ff02::1",
            // The IPv4 address inside an IPv6 one.
            "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:10.1.2.3", "::ffff:169.254.169.254", "::127.0.0.1", "::10.0.0.1",
            "64:ff9b::10.0.0.1", "64:ff9b::7f00:1", "2002:c0a8:0101::1", "2002:7f00:1::",
        ]
        for a in refused { XCTAssertTrue(isPrivate(a), a) }
    }

    func testPublicAddresses() {
        let allowed = [
            "1.1.1.1", "8.8.8.8", "9.255.255.255", "11.0.0.1", "100.63.255.255", "100.128.0.1", "172.15.255.255",
            "172.32.0.1", "192.167.1.1", "192.169.0.1", "169.253.1.1", "198.17.0.1", "198.20.0.1", "192.0.2.1", "223.255.255.255",
            "2001:4860:4860::8888", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "fbff::1",
        ]
        for a in allowed { XCTAssertFalse(isPrivate(a), a) }
    }

    func testNotAnAddressIsPrivate() {
        XCTAssertTrue(PrivateAddress.isPrivate([]))
        XCTAssertTrue(PrivateAddress.isPrivate([1, 2, 3]))
        XCTAssertNil(PrivateAddress.bytes("localhost"))
        XCTAssertNil(PrivateAddress.bytes("2130706433"))
    }

    func testRefusalNamesTheAddressAndTheSetting() {
        let r = RedirectRefusal(status: 302, target: "http://inside.example/x", reason: .privateAddress("10.0.0.7"))
        XCTAssertEqual(
            r.description,
            "HTTP 302 redirect to http://inside.example/x refused: it leads to the private address 10.0.0.7 (refuse_private_redirects)")
    }
}
