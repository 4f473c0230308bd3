import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class DurationTests: XCTestCase {
    func testParsesUnitsAndCompounds() throws {
        XCTAssertEqual(try DurationParser.seconds("30s"), 30)
        XCTAssertEqual(try DurationParser.seconds("5m"), 300)
        XCTAssertEqual(try DurationParser.seconds("1h30m"), 5400)
        XCTAssertEqual(try DurationParser.seconds("7d"), 604_800)
        XCTAssertEqual(try DurationParser.seconds("250ms"), 0.25)
        XCTAssertEqual(try DurationParser.seconds("90s"), 90)
        XCTAssertEqual(try DurationParser.seconds("1.5h"), 5400)
    }

    func testRejectsNonsense() {
        for bad in ["", "5", "m", "5x", "-5s", "5 m s", "1h-3m", "s5"] {
            XCTAssertThrowsError(try DurationParser.seconds(bad), "\(bad) should not parse")
        }
    }

    func testFormatsReadably() {
        XCTAssertEqual(DurationParser.format(90), "1m30s")
        XCTAssertEqual(DurationParser.format(3600), "1h")
        XCTAssertEqual(DurationParser.format(0.25), "250ms")
        XCTAssertEqual(DurationParser.format(86_400 + 61), "1d1m1s")
    }
}
