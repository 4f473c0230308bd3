import CDynamicLoad
import XCTest

@testable import TidingsProviders

/// Libraries loaded at first use (DESIGN §15, CDynamicLoad): a missing one, or one without a
/// function tidings calls, is an error naming the library and the Debian package, not a crash.
final class LibraryLoadingTests: XCTestCase {
    /// What `tidings_dl_load` says for `soname` and `functions` (nil when it loaded them all).
    private func load(_ soname: String, _ functions: [String], package: String = "libexample9") -> String? {
        let names = functions.map { strdup($0) }
        defer { names.forEach { free($0) } }
        var slots = [UnsafeMutableRawPointer?](repeating: nil, count: functions.count)
        var error = [CChar](repeating: 0, count: 512)
        let constNames = names.map { UnsafePointer<CChar>($0) }
        let r = constNames.withUnsafeBufferPointer { n in
            slots.withUnsafeMutableBufferPointer { s in
                tidings_dl_load(soname, package, n.baseAddress, s.baseAddress, functions.count, &error, error.count)
            }
        }
        if r == 0 {
            XCTAssertTrue(slots.allSatisfy { $0 != nil }, "every function resolved")
            return nil
        }
        return String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func testAMissingLibraryNamesItsSonameAndPackage() {
        let message = load("libtidings-absent.so.9", ["absent_function"])
        XCTAssertEqual(
            message,
            "libtidings-absent.so.9 could not be loaded (libtidings-absent.so.9: cannot open shared object file: No such file or directory): install the Debian package libexample9"
        )
    }

    func testAMissingFunctionNamesIt() {
        let message = load("libc.so.6", ["strlen", "tidings_no_such_function"], package: "libc6")
        XCTAssertEqual(message, "libc.so.6 has no function tidings_no_such_function (too old?): install a current Debian package libc6")
        XCTAssertNil(load("libc.so.6", ["strlen", "getpid"]))
    }

    func testLibxml2LoadsAtFirstUseAndParses() throws {
        try XMLFeed.setUp()
        XCTAssertNotNil(PageXPath.check("//a["), "libxml2 says what is wrong")
        XCTAssertNil(PageXPath.check("//a[@href]"))
        XCTAssertEqual(HTMLText.text("<p>one &amp; two</p>"), "one & two")
    }
}
