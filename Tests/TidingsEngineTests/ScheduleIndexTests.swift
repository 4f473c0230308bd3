import FoundationEssentials
import TidingsTestSupport
import XCTest

@testable import TidingsEngine
@testable import TidingsPluginAPI

/// What the scheduler and the lease rounds keep for 100,000 sources without a dictionary of
/// them (issue 33): ``SourceIndex``, ``LeaseLengths``, and the stored schedules read a list at a
/// time (``StoredSchedule/all(_:names:)``).
final class ScheduleIndexTests: XCTestCase {
    private func source(_ name: String) -> SourceConfig {
        SourceConfig(
            name: name, provider: "test", settings: SourceSettings(), flapWindow: 0, instance: UnbuiltProvider(), file: "t", line: nil,
            configHash: "h")
    }

    func testSourceIndexFindsEveryNameInSortedAndUnsortedLists() {
        let names = (0..<300).map { "s\($0)" }
        for list in [names.sorted(), names, names.shuffled()] {
            let sources = list.map(source)
            let index = SourceIndex(sources)
            for (i, s) in sources.enumerated() { XCTAssertEqual(index.index(of: s.name, in: sources), i) }
            for missing in ["", "s", "s3000", "t", "r"] { XCTAssertNil(index.index(of: missing, in: sources), missing) }
        }
        XCTAssertNil(SourceIndex([]).index(of: "a", in: []))
    }

    func testSourceIndexFindsTheFirstOfARepeatedName() {
        let sources = ["b", "a", "b", "c"].map(source)
        XCTAssertEqual(SourceIndex(sources).index(of: "b", in: sources), 0)
    }

    func testLeaseLengthsAnswerAsADictionaryWould() {
        var dictionary: [String: TimeInterval] = [:]
        var lengths = LeaseLengths()
        var pairs: [(name: String, length: TimeInterval)] = []
        for k in (0..<500).shuffled() {
            let name = "source:s\(k % 400)"
            dictionary[name] = Double(k)
            lengths[name] = Double(k)
            pairs.append((name, Double(k)))
        }
        for k in stride(from: 0, to: 400, by: 7) {
            dictionary["source:s\(k)"] = nil
            lengths["source:s\(k)"] = nil
        }
        XCTAssertEqual(lengths.count, dictionary.count)
        XCTAssertEqual(lengths.keys, dictionary.keys.sorted())
        for name in dictionary.keys { XCTAssertEqual(lengths[name], dictionary[name]) }
        XCTAssertNil(lengths["source:s0"])
        XCTAssertNil(lengths["source:t"])
        let built = LeaseLengths(pairs)
        XCTAssertEqual(built.count, 400)
        for (name, length) in pairs.reversed() where built[name] != nil {
            // The last length given for a name counts.
            XCTAssertEqual(built[name], pairs.last { $0.name == name }!.length)
            _ = length
        }
    }

    /// 1,234 names read 500 to a statement: each schedule comes back at its name's place, a name
    /// without a row as nil, and the credentials-rejected hashes by name.
    func testStoredSchedulesComeBackInTheOrderOfTheNames() async throws {
        let store = try makeTestStore()
        let t0 = 1_000_000.0
        try await store.database.write { db in
            for k in stride(from: 0, to: 1234, by: 2) {
                try db.execute(
                    "INSERT INTO source_state(source, provider, next_due, failures, auth_failed_hash) VALUES (?, 'test', ?, ?, ?)",
                    "s\(k)", t0 + Double(k), k % 3, k == 1000 ? "h" : nil)
            }
        }
        let names = (0..<1234).map { "s\($0)" }.shuffled()
        let (schedules, authFailed) = try await store.database.read { try StoredSchedule.all($0, names: names) }
        XCTAssertEqual(schedules.count, names.count)
        for (i, name) in names.enumerated() {
            let k = Int(name.dropFirst())!
            if k % 2 == 0 {
                XCTAssertEqual(schedules[i], StoredSchedule(nextDue: Date(timeIntervalSince1970: t0 + Double(k)), failures: k % 3), name)
            } else {
                XCTAssertNil(schedules[i], name)
            }
        }
        XCTAssertEqual(authFailed, ["s1000": "h"])
    }
}
