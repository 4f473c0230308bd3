import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class LoopbackTests: XCTestCase {
    func testLoopbackHostsAndLookalikes() {
        for h in ["localhost", "LOCALHOST", "a.localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"] {
            XCTAssertTrue(Loopback.contains(host: h), h)
        }
        // A name that starts like an address is a name, resolved anywhere.
        for h in ["127.example.com", "127.0.0.1.nip.io", "localhost.example.com", "128.0.0.1", "10.0.0.1", "::2", "::ffff:10.0.0.1", "example.com", ""] {
            XCTAssertFalse(Loopback.contains(host: h), h)
        }
        XCTAssertTrue(Loopback.contains(URL(string: "http://127.0.0.1:8080/x")!))
        XCTAssertFalse(Loopback.contains(URL(string: "http://127.evil.example/x")!))
    }
}
