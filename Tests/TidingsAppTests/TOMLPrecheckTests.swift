import Foundation
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class TOMLPrecheckTests: XCTestCase {
    private func error(_ text: String) -> ConfigError? {
        do {
            _ = try ConfigTable.parse(text, file: "/etc/t.toml")
            return nil
        } catch let e as ConfigError {
            return e
        } catch {
            XCTFail("\(error)")
            return nil
        }
    }

    private func dotted(_ n: Int) -> String { Array(repeating: "a", count: n).joined(separator: ".") }

    /// A 16 KB line of `a.a.a.…=1` took minutes (each level looked its path up again): it is
    /// refused at once, naming the file and line.
    func testDeepDottedKeyIsRefusedWithFileAndLine() throws {
        let e = try XCTUnwrap(error("x = 1\n\(dotted(8000)) = 1\n"))
        XCTAssertEqual(e.file, "/etc/t.toml")
        XCTAssertEqual(e.line, 2)
        XCTAssertTrue(e.message.contains("a key nests more than \(TOMLPrecheck.maxDepth) levels"), e.message)
    }

    func testHeadersArraysAndInlineTablesCountTowardsTheDepth() throws {
        let n = TOMLPrecheck.maxDepth
        XCTAssertEqual(error("[\(dotted(n + 1))]\n")?.message.contains("a table header nests"), true)
        XCTAssertEqual(error("a = \(String(repeating: "[", count: n + 1))\(String(repeating: "]", count: n + 1))\n")?.message.contains("a value nests"), true)
        XCTAssertEqual(error("a = \(String(repeating: "{ b = ", count: n))1\(String(repeating: " }", count: n))\n")?.message.contains("nests"), true)
        // 20 header segments + 13 key segments.
        let e = try XCTUnwrap(error("[\(dotted(20))]\nok = 1\n\(dotted(13)) = 1\n"))
        XCTAssertEqual(e.line, 3)
        XCTAssertTrue(e.message.contains("a key nests"), e.message)
    }

    func testDepthUpToTheLimitLoadsAndDotsInStringsAndValuesDoNotCount() throws {
        let half = TOMLPrecheck.maxDepth / 2
        let t = try ConfigTable.parse(
            """
            [\(dotted(half))]
            \(dotted(half)) = 1
            "q.u.o.t.e.d.k.e.y.w.i.t.h.m.a.n.y.d.o.t.s.a.b.c.d.e.f.g.h.i.j.k.l.m" = "\(String(repeating: ".", count: 100))"
            v = [1.5, 2.5, { w = 1979-05-27T07:32:00.5 }]
            """, file: "/etc/t.toml")
        XCTAssertEqual(t.keys, ["a"])
    }

    /// Keys implied by a dotted key or a header take the line of the nearest written parent.
    func testImpliedTablesTakeTheirParentsLine() throws {
        let t = try ConfigTable.parse("x = 1\n[sources.web]\nheaders.Accept = \"json\"\nlist = [1, 2]\n", file: "/etc/t.toml")
        guard case .table(let sources) = t["sources"]?.value, case .table(let web) = sources["web"]?.value,
            case .table(let headers) = web["headers"]?.value, case .array(let list) = web["list"]?.value
        else {
            return XCTFail("unexpected shape")
        }
        XCTAssertEqual(t.keys, ["x", "sources"])
        XCTAssertEqual(sources["web"]?.line, 2)
        XCTAssertEqual(web["headers"]?.line, 2)
        XCTAssertEqual(headers["Accept"]?.line, 3)
        XCTAssertEqual(list.map(\.line), [4, 4])
    }
}
