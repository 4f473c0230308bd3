import Foundation
import TidingsCurl
import TidingsSinks
import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsProviders
@testable import TidingsSQLite

/// Inputs that once crashed a `make fuzz` target, kept in FuzzRegressions/TARGET/ as raw bytes.
///
/// `testEverySavedInputReplays` feeds every file through the same call as the fuzz target of its
/// folder (Fuzz/Sources/TidingsFuzz/Targets.swift: keep the two in step): before the fix each
/// of them killed the process, so this test could not finish. The named tests below say what
/// the answer must be now.
final class FuzzRegressionTests: XCTestCase {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("FuzzRegressions")

    /// Target name → the fuzz target's call (same names as Fuzz/corpus/).
    static let targets: [String: @Sendable (Data) -> Void] = [
        "config": { _ = try? loadConfig($0) },
        "duration": { data in
            let text = String(decoding: data, as: UTF8.self)
            if let s = try? DurationParser.seconds(text) { _ = DurationParser.format(s) }
            if let wait = retryAfter(text) { _ = DurationParser.format(wait.rounded(.up)) }
        },
        "sportdate": { _ = try? SportdateProvider.decode($0, base: URL(string: "https://www.sportdate.se")!, email: "fuzz@example.com") },
        "statuspage": { _ = try? StatuspageProvider.decode($0, host: "status.example.com") },
        "economic": {
            _ = try? EconomicProvider.decodePage($0, page: 1, base: URL(string: "https://restapi.e-conomic.com")!)
            _ = EconomicProvider.error(HTTPResponse(status: 400, headers: [:], body: $0), page: 2)
        },
        "alertmanager": { _ = try? AlertmanagerProvider.decode($0, now: Date(timeIntervalSince1970: 1_795_000_000)) },
        "http-json": { data in
            let url = URL(string: "https://api.example.com/items")!
            let sources = [
                HTTPJSONProvider(
                    url: url, items: "/data", key: FieldTemplate("/id"), title: FieldTemplate("{/name} is {/status}"),
                    body: FieldTemplate("/detail/text"), link: FieldTemplate("/links/0/href"), severity: FieldTemplate("/level")),
                HTTPJSONProvider(url: url),
            ]
            for p in sources { _ = try? p.decode(data) }
        },
        "exec-output": {
            _ = try? ExecProvider.parseJSONLines($0)
            _ = ExecProvider.nagiosItem(status: Int32(($0.first ?? 0) % 4), stdout: $0, name: "fuzz")
        },
        "feed": { data in
            let source = FeedProvider(url: URL(string: "https://blog.example.com/feed.xml")!)
            _ = try? source.decode(data)
            _ = try? source.decode(data, charset: "windows-1252")
        },
    ]

    static func loadConfig(_ data: Data) throws -> TidingsConfig {
        let loader = ConfigLoader(providers: BuiltinProviders.registry, sinks: BuiltinSinks.registry, http: testHTTP, mail: testHTTP)
        return try loader.load(text: String(decoding: data, as: UTF8.self), file: "/nonexistent/tidings-fuzz/tidings.toml")
    }

    static func retryAfter(_ value: String) -> TimeInterval? {
        HTTPResponse(status: 429, headers: ["retry-after": value], body: Data()).retryAfter
    }

    func input(_ target: String, _ name: String) throws -> Data {
        try Data(contentsOf: Self.folder.appendingPathComponent(target).appendingPathComponent(name))
    }

    func testEverySavedInputReplays() throws {
        let fm = FileManager.default
        var replayed = 0
        for target in try fm.contentsOfDirectory(atPath: Self.folder.path).sorted() {
            let run = try XCTUnwrap(Self.targets[target], "FuzzRegressions/\(target): no such fuzz target")
            for name in try fm.contentsOfDirectory(atPath: Self.folder.appendingPathComponent(target).path).sorted() {
                run(try input(target, name))
                replayed += 1
            }
        }
        XCTAssertGreaterThan(replayed, 0)
    }

    /// The saved config crasher and more texts of its kind each throw a ``ConfigError`` mentioning `words`.
    func assertSyntaxError(mentioning words: String, crasher: String, also texts: [String], line: UInt = #line) throws {
        for text in [String(decoding: try input("config", crasher), as: UTF8.self)] + texts {
            XCTAssertThrowsError(try ConfigTable.parse(text, file: "t.toml"), text.debugDescription, line: line) { error in
                let message = (error as? ConfigError)?.message ?? ""
                XCTAssertTrue(message.contains(words), "\(text.debugDescription): \(error)", line: line)
            }
        }
    }

    /// toml++ asserted (abort) on a table header whose key starts with a character that cannot start a key.
    func testTableHeaderWithBadKeyStartIsASyntaxError() throws {
        try assertSyntaxError(
            mentioning: "table header", crasher: "toml-header-key-assert",
            also: ["[é]\n", "[[{a]]\n", "[ =x]\n", "\u{FEFF}[%]\n", "a = 1\n  [\t!b]\n", "[[[a]]]\n"])
        // Not headers: brackets inside values, strings and comments; valid headers of every shape.
        let fine = """
            a = [
              [{ b = 1 }],
              ["[é]"],
            ]
            s = '''
            [é]
            '''
            t = \"\"\"
            [{x} \\\""" still inside
            [é]\"\"\"
            # [é]
            [ "q.k" . r ]
            [[ arr ]]
            [-_x9]

            """
        XCTAssertNoThrow(try ConfigTable.parse(fine, file: "t.toml"))
    }

    /// toml++ asserted (abort) on a date-time whose time does not start with a digit.
    func testDateTimeWithoutTimeIsASyntaxError() throws {
        try assertSyntaxError(
            mentioning: "date-time", crasher: "toml-datetime-time-assert",
            also: ["a = 1979-05-27T(07:32:00Z\n", "a = [1979-05-27t]\n", "a = { b = 1979-05-27Tx:00 }\n", "a = [1, 2026-01-01T]"])
        let fine = """
            a = 1979-05-27T07:32:00Z
            b = [1979-05-27t07:32:00, 1979-05-27 07:32:00+01:00, 1979-05-27, 07:32:00]
            1979-05-27Tx = "a bare key, not a value"
            c = { d = 1979-05-27T00:00:00.5Z }

            """
        XCTAssertNoThrow(try ConfigTable.parse(fine, file: "t.toml"))
    }

    /// toml++ asserted (abort) on a `}` where an array expects an element.
    func testBraceInArrayIsASyntaxError() throws {
        try assertSyntaxError(
            mentioning: "in an array, saw '}'", crasher: "toml-brace-in-array-assert",
            also: ["a = [}\n", "a = [1, }\n", "a = [\n  1, # c\n  }\n", "a = { b = [[2], }\n"])
        XCTAssertNoThrow(try ConfigTable.parse("a = [{}, { b = [] }, # c\n  1979-05-27T07:32:00Z]\nc = { d = [1] }\n", file: "t.toml"))
        // A date-time check after a comment inside an array (the comment used to end the value position).
        XCTAssertThrowsError(try ConfigTable.parse("a = [ # c\n 1979-05-27T]\n", file: "t.toml"))
    }

    /// Seen while reading the loader for the fuzz target (the fuzzer had not reached it): a size
    /// past Int.max trapped in `Int(_:)`.
    func testHugeByteSizeIsAnError() throws {
        for size in ["1e300MiB", "infKB", "nanB", "9e18GiB"] {
            XCTAssertThrowsError(try Self.loadConfig(Data("[defaults]\nmax_body = \"\(size)\"\n".utf8)), size) { error in
                XCTAssertTrue("\(error)".contains("invalid size"), "\(size): \(error)")
            }
        }
        XCTAssertEqual(try Self.loadConfig(Data("[defaults]\nmax_body = \"8GiB\"\n".utf8)).defaults.maxBody, 8 << 30)
    }

    /// An e-conomic amount of 1.9e84 (or "nan") trapped in `Int64(_:)` when formatting the draft's money.
    func testHugeInvoiceAmountFormats() throws {
        let page = try EconomicProvider.decodePage(try input("economic", "huge-amount"), page: 1, base: URL(string: "https://restapi.e-conomic.com")!)
        XCTAssertEqual(page.items.map(\.key), ["6", "7"])
        XCTAssertTrue(page.items[1].body.contains("net 1.888888888888889e+84 "), page.items[1].body)
        XCTAssertEqual(Draft.money(.nan), "nan")
        XCTAssertEqual(Draft.money(-.infinity), "-inf")
        XCTAssertEqual(Draft.money(123_456_789_012.5), "123,456,789,012.50")
        XCTAssertEqual(Draft.money(-15.625), "-15.63")
    }

    /// Foundation's DateFormatter trapped ("Incorrect range CFRange…") on a Retry-After with a combining mark.
    func testNonASCIIRetryAfterIsIgnored() throws {
        let text = String(decoding: try input("duration", "dateformatter-combining-mark"), as: UTF8.self)
        XCTAssertNil(Self.retryAfter(text))
        XCTAssertNil(Self.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT\r\n"))
        XCTAssertNil(Self.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT\u{301}"))
        XCTAssertEqual(Self.retryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), 0, "an HTTP date in the past: retry now")
        let soon = Date().addingTimeInterval(3600)
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let wait = try XCTUnwrap(Self.retryAfter(f.string(from: soon)))
        XCTAssertEqual(wait, 3600, accuracy: 5)
    }

    /// A Retry-After of 3.3e24 s made `DurationParser.format` trap in `Int(_:)` (the poll runner logs it).
    func testHugeRetryAfterIsCappedAndFormats() throws {
        let text = String(decoding: try input("duration", "huge-retry-after"), as: UTF8.self)
        XCTAssertEqual(Self.retryAfter(text), HTTPResponse.maxRetryAfter)
        XCTAssertEqual(Self.retryAfter("120"), 120)
        XCTAssertEqual(Self.retryAfter("-5"), 0)
        XCTAssertNil(Self.retryAfter("inf"))
        XCTAssertNil(Self.retryAfter("nan"))
        XCTAssertThrowsError(try DurationParser.seconds(text))
        XCTAssertEqual(DurationParser.format(HTTPResponse.maxRetryAfter), "7d")
        XCTAssertEqual(DurationParser.format(3.3e24), "11574074074d1h46m40s")
        XCTAssertEqual(DurationParser.format(.infinity), "11574074074d1h46m40s")
        XCTAssertEqual(DurationParser.format(-.infinity), "-1000000000000000000ms")
        XCTAssertEqual(DurationParser.format(.nan), "?")
        let e = EconomicProvider.error(HTTPResponse(status: 429, headers: ["retry-after": text], body: Data()), page: 1)
        XCTAssertTrue(e.message.hasSuffix("retry after 7d"), e.message)
    }
}
