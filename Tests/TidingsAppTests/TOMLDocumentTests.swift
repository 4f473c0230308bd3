import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsPluginAPI

final class TOMLDocumentTests: XCTestCase {
    static let plugin = """
        provider = "http-json"
        url = "http://127.0.0.1:1/s/1.json"
        items = "/items"
        key = "/id"
        title = "{/title} is {/status}"
        interval = "60s"
        jitter = 0.1
        max_events = 100
        enabled = true
        tags = ["a", "b", 3]
        [headers]
        Accept = "application/json"
        nested = { deep = { deeper = 1.5 } }
        """

    func testEveryTypeIsReadWithItsLine() throws {
        let t = try ConfigTable.parse(Self.plugin, file: "/etc/p.toml")
        XCTAssertEqual(t.keys, ["provider", "url", "items", "key", "title", "interval", "jitter", "max_events", "enabled", "tags", "headers"])
        guard case .string("http-json")? = t.entries["provider"]?.value else { return XCTFail("provider") }
        guard case .double(0.1)? = t.entries["jitter"]?.value else { return XCTFail("jitter") }
        guard case .int(100)? = t.entries["max_events"]?.value else { return XCTFail("max_events") }
        guard case .bool(true)? = t.entries["enabled"]?.value else { return XCTFail("enabled") }
        guard case .array(let tags)? = t.entries["tags"]?.value, tags.count == 3, case .int(3) = tags[2].value else { return XCTFail("tags") }
        XCTAssertEqual(t.entries["tags"]?.line, 10)
        guard case .table(let headers)? = t.entries["headers"]?.value,
            case .table(let nested)? = headers.entries["nested"]?.value,
            case .table(let deep)? = nested.entries["deep"]?.value,
            case .double(1.5)? = deep.entries["deeper"]?.value
        else { return XCTFail("headers") }
        XCTAssertEqual(headers.line, 11)
        XCTAssertEqual(deep.entries["deeper"]?.line, 13, "an inline table's values take the line they are on")
    }

    /// TOMLKit keeps every document it parses and every string, number and key list it hands
    /// out; the daemon parses each plugin file again on every reload.
    func testParsingDocumentsDoesNotGrowTheProcess() throws {
        // Resident memory (malloc's own counters are not in the Glibc module).
        func resident() throws -> Int {
            let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
            return Int(statm[1])! * Int(sysconf(Int32(_SC_PAGESIZE)))
        }
        for _ in 0..<500 { _ = try ConfigTable.parse(Self.plugin, file: "/etc/p.toml") }  // warm caches and the heap
        let before = try resident()
        for _ in 0..<5000 { _ = try ConfigTable.parse(Self.plugin, file: "/etc/p.toml") }
        let grown = try resident() - before
        // Reading through TOMLKit's own accessors kept ~2 KB of this document: 10 MB here.
        // What stays now is toml++'s root table (96 bytes, not freeable from outside TOMLKit).
        XCTAssertLessThan(grown, 3 << 20, "bytes the process grew by over 5,000 parses")
    }
}
