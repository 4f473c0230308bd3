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

    /// Issue 30 item 18: ten years or more was "expected a number and a unit"; it names the limit.
    func testTooLongNamesTheLimit() throws {
        XCTAssertEqual(try DurationParser.seconds("3649d"), 3649 * 86_400)
        for long in ["3650d", "522w", "87600h", "99999999999999999999999s", "3649d24h"] {
            XCTAssertThrowsError(try DurationParser.seconds(long)) { e in
                XCTAssertEqual(
                    "\(e)", "invalid duration \"\(long)\": durations must be shorter than 3650d (10 years)")
            }
        }
        XCTAssertThrowsError(try DurationParser.seconds("5x")) { e in
            XCTAssertTrue("\(e)".contains("expected a number and a unit"), "\(e)")
        }
    }

    func testFormatsReadably() {
        XCTAssertEqual(DurationParser.format(90), "1m30s")
        XCTAssertEqual(DurationParser.format(3600), "1h")
        XCTAssertEqual(DurationParser.format(0.25), "250ms")
        XCTAssertEqual(DurationParser.format(86_400 + 61), "1d1m1s")
    }
}
