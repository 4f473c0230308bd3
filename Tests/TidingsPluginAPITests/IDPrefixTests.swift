import TidingsTestSupport
import XCTest

@testable import TidingsApp
@testable import TidingsEngine
@testable import TidingsPOSIX
@testable import TidingsPluginAPI
@testable import TidingsSQLite

final class IDPrefixTests: XCTestCase {
    /// Two ULIDs from the same millisecond share their first 10 characters.
    let sameMillisecond = ["01JD3V7Q2MABCDEFGHJKMNPQRS", "01JD3V7Q2MABXYZ0123456789A"]

    func testLengthIsAtLeastTheMinimumAndTellsEveryIdApart() {
        XCTAssertEqual(IDPrefix.length(for: []), 8)
        XCTAssertEqual(IDPrefix.length(for: ["01JD3V7Q2MABCDEFGHJKMNPQRS"]), 8)
        XCTAssertEqual(IDPrefix.length(for: ["01JD3V7Q2MABCDEFGHJKMNPQRS", "01JE000000000000000000000A"]), 8)
        XCTAssertEqual(IDPrefix.length(for: sameMillisecond), 13)
        XCTAssertEqual(IDPrefix.length(for: ["SAME", "SAME"]), 8, "duplicates cannot be told apart; no endless loop")
    }

    func testResolve() {
        let ids = sameMillisecond + ["01JE000000000000000000000A"]
        XCTAssertEqual(IDPrefix.resolve(ids[0], among: ids), .one(ids[0]))
        XCTAssertEqual(IDPrefix.resolve("01jd3v7q2mabc", among: ids), .one(ids[0]), "any case")
        XCTAssertEqual(IDPrefix.resolve("01JE0000", among: ids), .one(ids[2]))
        XCTAssertEqual(IDPrefix.resolve("01JD3V7Q", among: ids), .ambiguous(sameMillisecond))
        XCTAssertEqual(IDPrefix.resolve("01JD", among: ids), .tooShort(sameMillisecond))
        XCTAssertEqual(IDPrefix.resolve("01JE", among: ids), .tooShort([ids[2]]), "too short even when unique")
        XCTAssertEqual(IDPrefix.resolve("", among: ids), .tooShort(ids))
        XCTAssertEqual(IDPrefix.resolve("01NOSUCHNOTICE", among: ids), .none)
    }
}
