import Foundation
import XCTest

@testable import TidingsPluginAPI

/// The TZif reader (issue 31 item 3) against Python's `zoneinfo` on the same zone files, and
/// the local zone as `TZ` and `/etc/localtime` name it. Fixed instants are inputs only.
final class ZoneTests: XCTestCase {
    static let zones = [
        "Europe/Copenhagen", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Europe/Dublin", "UTC",
        "America/Nuuk", "Asia/Jerusalem",  // footers with a negative and a past-24h transition time
    ]
    /// Zones with only a footer rule (`J` days, a negative time and one past 24 h), written as
    /// TZif files for both sides.
    static let synthetic = ["Test/Footer": "AAA-1BBB-2,J10/-2,J300/30", "Test/Southern": "<-03>3<-02>,M10.1.0/0,M2.3.0/-1"]
    /// TZ strings (`TZ=...`) checked against the C library's `localtime`, offsets only. The `n`
    /// form is here rather than in a TZif file because Python 3.11's zoneinfo reads `n` as
    /// 1-based (one day early); glibc reads it as POSIX says (0 = January 1).
    static let posix = ["AAA-1BBB-2,10/-2,300/30", "EST5EDT,M3.2.0,M11.1.0", "<+0330>-3:30"]

    /// 1970-01-01 … 2041-01-01: the tables end in 2037, the footer rule takes over after.
    let span: ClosedRange<Int64> = 0...CivilTime(year: 2041, month: 1, day: 1).seconds

    func testAgreesWithPythonZoneinfo() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-zones-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, footer) in Self.synthetic {
            let file = dir.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(Self.footerOnlyTZif(footer)).write(to: file)
        }
        var queries = ""
        var ours: [String] = []
        var transitionCount = 0
        for name in Self.zones + Self.synthetic.keys.sorted() + Self.posix.map({ "posix:" + $0 }) {
            let zone: Zone
            if name.hasPrefix("posix:") {
                zone = Zone.local(tz: String(name.dropFirst(6)), directory: "/nonexistent")
                XCTAssertNotEqual(zone, .utc, name)
            } else {
                zone = try XCTUnwrap(Self.synthetic[name] == nil ? Zone.named(name) : Zone.named(name, directory: dir.path), name)
            }
            queries += "Z \(name)\n"
            var instants: [Int64] = []
            let changes = zone.rules.transitions(in: span)
            transitionCount += changes.count
            if !["UTC", "Asia/Kolkata", "posix:<+0330>-3:30"].contains(name) { XCTAssertGreaterThan(changes.count, 1, name) }
            for c in changes { instants += [c.at - 1, c.at, c.at + 1] }
            instants += stride(from: span.lowerBound, through: span.upperBound, by: 86_413).map { $0 }
            for year in [2025, 2038] {  // hourly through a year in the table and one past it
                let from = CivilTime(year: year, month: 1, day: 1).seconds
                instants += stride(from: from, to: from + 366 * 86_400, by: 3600).map { $0 }
            }
            for t in instants {
                queries += "O \(t)\n"
                let ty = zone.type(at: t)
                ours.append("\(ty.offset) \(ty.abbreviation)")
            }
            // Wall times around each change: before it, in its gap or repeat, after it.
            var previous = zone.type(at: span.lowerBound).offset
            for c in changes where !name.hasPrefix("posix:") {
                let edges: Set<Int64> = [c.at + Int64(previous), c.at + Int64(c.type.offset)]
                let locals: [Int64] = edges.sorted().flatMap { (e: Int64) -> [Int64] in [e - 1, e, e + 1, e + 900] }
                for local in locals {
                    let wall = CivilTime(seconds: local)
                    queries += "L \(wall.year) \(wall.month) \(wall.day) \(wall.hour) \(wall.minute) \(wall.second)\n"
                    ours.append("\(zone.instant(of: wall))")
                }
                previous = c.type.offset
            }
        }
        let input = dir.appendingPathComponent("queries")
        try queries.write(to: input, atomically: true, encoding: .utf8)
        let theirs = try Self.python(Self.oracle, input.path, tzpath: "\(dir.path):\(Zone.directory)")
        XCTAssertEqual(theirs.count, ours.count, "one answer per query")
        var mismatches: [String] = []
        let lines = queries.split(separator: "\n").filter { !$0.hasPrefix("Z ") }
        for (i, (a, b)) in zip(ours, theirs).enumerated() where a != b {
            mismatches.append("\(lines[i]): tidings \(a), zoneinfo \(b)")
        }
        XCTAssertEqual(mismatches.count, 0, "first mismatches:\n" + mismatches.prefix(20).joined(separator: "\n"))
        XCTAssertGreaterThan(transitionCount, 900, "the grid covers the transitions")
    }

    /// Reads lines `Z name` (switch zone; `Z posix:TZ` → glibc's `localtime` with that `TZ`),
    /// `O instant` (→ `offset abbreviation`) and
    /// `L y m d H M S` (→ the instant: a repeated time's first occurrence, fold=0; a time in a gap
    /// → the instant of the change, the first one after it that exists).
    static let oracle = #"""
        import os, sys, time
        from datetime import datetime, timezone, timedelta
        from zoneinfo import ZoneInfo
        zone = None
        posix = False
        out = []
        def wall(t):
            return datetime.fromtimestamp(t, zone).replace(tzinfo=None)
        for line in open(sys.argv[1]):
            kind, *rest = line.rstrip("\n").split(" ", 1) if line.startswith("Z ") else line.split()
            if kind == "Z":
                posix = rest[0].startswith("posix:")
                if posix:
                    os.environ["TZ"] = rest[0][6:]
                    time.tzset()
                else:
                    zone = ZoneInfo(rest[0])
            elif kind == "O" and posix:
                tm = time.localtime(int(rest[0]))
                out.append("%d %s" % (tm.tm_gmtoff, tm.tm_zone))
            elif kind == "O":
                d = datetime.fromtimestamp(int(rest[0]), zone)
                out.append("%d %s" % (d.utcoffset() // timedelta(seconds=1), d.tzname()))
            else:
                w = datetime(*map(int, rest))
                t = int(w.replace(tzinfo=zone, fold=0).timestamp())
                if wall(t) != w:  # in a gap: the first instant whose wall time is past w
                    lo, hi = t - 2 * 86400, t
                    while lo < hi:
                        mid = (lo + hi) // 2
                        if wall(mid) > w: hi = mid
                        else: lo = mid + 1
                    t = lo
                out.append(str(t))
        print("\n".join(out))
        """#

    static func python(_ script: String, _ args: String..., tzpath: String) throws -> [String] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", script] + args
        p.environment = ["PYTHONTZPATH": tzpath, "PATH": "/usr/bin:/bin"]
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "python3 zoneinfo oracle failed")
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// A TZif version 2 file with no transitions, one type (the footer's standard time) and the footer.
    static func footerOnlyTZif(_ footer: String) -> [UInt8] {
        let rule = PosixTZ(footer)!
        let abbr = Array(rule.std.abbreviation.utf8) + [0]
        func be32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: UInt32(bitPattern: Int32(v)) >> (24 - 8 * $0)) } }
        func block() -> [UInt8] {
            var b = Array("TZif2".utf8) + [UInt8](repeating: 0, count: 15)
            b += be32(0) + be32(0) + be32(0) + be32(0) + be32(1) + be32(abbr.count)
            b += be32(rule.std.offset) + [0, 0] + abbr
            return b
        }
        return block() + block() + Array("\n\(footer)\n".utf8)
    }

    // MARK: Local wall time → instant, quiet hours and silences across both DST changes

    let berlin = Zone.named("Europe/Berlin")!
    func at(_ text: String) -> Date { Timestamp.parse(text)! }

    func testWallTimeInGapAndRepeat() {
        // 2026-03-29: 02:00 CET → 03:00 CEST; 2026-10-25: 03:00 CEST → 02:00 CET.
        XCTAssertEqual(berlin.instant(of: .init(year: 2026, month: 3, day: 29, hour: 1, minute: 59, second: 59)), at("2026-03-29T00:59:59Z").unix)
        XCTAssertEqual(berlin.instant(of: .init(year: 2026, month: 3, day: 29, hour: 2, minute: 30)), at("2026-03-29T01:00:00Z").unix, "gap: the next time that exists")
        XCTAssertEqual(berlin.instant(of: .init(year: 2026, month: 3, day: 29, hour: 3)), at("2026-03-29T01:00:00Z").unix)
        XCTAssertEqual(berlin.instant(of: .init(year: 2026, month: 10, day: 25, hour: 2, minute: 30)), at("2026-10-25T00:30:00Z").unix, "repeat: the first")
        XCTAssertEqual(berlin.instant(of: .init(year: 2026, month: 10, day: 25, hour: 3)), at("2026-10-25T02:00:00Z").unix)
        XCTAssertEqual(berlin.civil(at: at("2026-10-25T01:30:00Z")).description, "2026-10-25 02:30:00")
        XCTAssertEqual(berlin.type(at: at("2026-10-25T01:30:00Z").unix).abbreviation, "CET")
        XCTAssertEqual(CivilTime(year: 2026, month: 11, day: 23).weekday, 2, "a Monday")
    }

    func testQuietHoursAcrossSpringGap() {
        let night = QuietHours(start: .init("22:00")!, end: .init("07:00")!, timeZone: berlin)
        // Saturday 22:00 CET (21:00Z) to Sunday 07:00 CEST (05:00Z): eight hours that night.
        XCTAssertEqual(night.end(ofWindowContaining: at("2026-03-28T21:00:00Z")), at("2026-03-29T05:00:00Z"))
        XCTAssertEqual(night.end(ofWindowContaining: at("2026-03-29T01:30:00Z")), at("2026-03-29T05:00:00Z"))
        XCTAssertNil(night.end(ofWindowContaining: at("2026-03-29T05:00:00Z")))
        XCTAssertNil(night.end(ofWindowContaining: at("2026-03-28T20:59:59Z")))
        // A window starting inside the gap starts when the clocks reach 03:00.
        let early = QuietHours(start: .init("02:30")!, end: .init("06:00")!, timeZone: berlin)
        XCTAssertNil(early.end(ofWindowContaining: at("2026-03-29T00:59:59Z")))
        XCTAssertEqual(early.end(ofWindowContaining: at("2026-03-29T01:00:00Z")), at("2026-03-29T04:00:00Z"))
    }

    func testQuietHoursAcrossAutumnRepeat() {
        let night = QuietHours(start: .init("22:00")!, end: .init("07:00")!, timeZone: berlin)
        // Saturday 22:00 CEST (20:00Z) to Sunday 07:00 CET (06:00Z): ten hours that night.
        XCTAssertEqual(night.end(ofWindowContaining: at("2026-10-24T20:00:00Z")), at("2026-10-25T06:00:00Z"))
        XCTAssertEqual(night.end(ofWindowContaining: at("2026-10-25T05:59:59Z")), at("2026-10-25T06:00:00Z"))
        XCTAssertNil(night.end(ofWindowContaining: at("2026-10-24T19:59:59Z")))
        // 02:30–03:00 begins at the first 02:30 (CEST) and holds through the repeated hour.
        let repeated = QuietHours(start: .init("02:30")!, end: .init("03:00")!, timeZone: berlin)
        XCTAssertNil(repeated.end(ofWindowContaining: at("2026-10-25T00:29:59Z")))
        XCTAssertEqual(repeated.end(ofWindowContaining: at("2026-10-25T00:30:00Z")), at("2026-10-25T02:00:00Z"))
        XCTAssertEqual(repeated.end(ofWindowContaining: at("2026-10-25T01:30:00Z")), at("2026-10-25T02:00:00Z"), "02:30 CET, the second time")
        XCTAssertNil(repeated.end(ofWindowContaining: at("2026-10-25T02:00:00Z")))
    }

    func testSilenceUntilAcrossDSTChanges() throws {
        XCTAssertEqual(try SilenceEnd.until("02:30").date(from: at("2026-03-28T12:00:00Z"), timeZone: berlin), at("2026-03-29T01:00:00Z"))
        XCTAssertEqual(try SilenceEnd.until("02:30").date(from: at("2026-10-24T12:00:00Z"), timeZone: berlin), at("2026-10-25T00:30:00Z"))
        XCTAssertEqual(try SilenceEnd.until("07:00").date(from: at("2026-10-25T06:00:00Z"), timeZone: berlin), at("2026-10-26T06:00:00Z"), "passed: tomorrow")
    }

    // MARK: The local zone and names

    func testTZEnvironment() throws {
        let winter = at("2026-01-15T12:00:00Z").unix, summer = at("2026-07-15T12:00:00Z").unix
        for spec in ["Europe/Berlin", ":Europe/Berlin", Zone.directory + "/Europe/Berlin", ":" + Zone.directory + "/Europe/Berlin"] {
            let z = Zone.local(tz: spec, localtime: "/nonexistent")
            XCTAssertEqual(z.identifier, "Europe/Berlin", spec)
            XCTAssertEqual([z.offset(at: winter), z.offset(at: summer)], [3600, 7200], spec)
        }
        let posix = Zone.local(tz: "EST5EDT,M3.2.0,M11.1.0", directory: "/nonexistent")
        XCTAssertEqual([posix.offset(at: winter), posix.offset(at: summer)], [-18_000, -14_400])
        XCTAssertEqual(posix.type(at: summer).abbreviation, "EDT")
        XCTAssertEqual(posix.rules.transitions(in: at("2026-01-01T00:00:00Z").unix...at("2027-01-01T00:00:00Z").unix).map(\.at),
                       [at("2026-03-08T07:00:00Z").unix, at("2026-11-01T06:00:00Z").unix])
        XCTAssertEqual(Zone.local(tz: "<+0530>-5:30", directory: "/nonexistent").offset(at: winter), 19_800)
        XCTAssertEqual(Zone.local(tz: "", localtime: "/nonexistent"), .utc)
        XCTAssertEqual(Zone.local(tz: "Mars/Olympus", localtime: "/nonexistent").identifier, "UTC")
        // Unset: /etc/localtime, a link into the zoneinfo directory (named by it) or a copy.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tidings-localtime-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let link = dir.appendingPathComponent("localtime").path, copy = dir.appendingPathComponent("copy").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: Zone.directory + "/America/New_York")
        try FileManager.default.copyItem(atPath: Zone.directory + "/America/New_York", toPath: copy)
        XCTAssertEqual(Zone.local(tz: nil, localtime: link).identifier, "America/New_York")
        XCTAssertEqual(Zone.local(tz: nil, localtime: copy).identifier, "localtime")
        XCTAssertEqual(Zone.local(tz: nil, localtime: copy).offset(at: summer), -14_400)
        XCTAssertEqual(Zone.local(tz: nil, localtime: dir.appendingPathComponent("missing").path), .utc)
    }

    func testNamesAreCheckedBeforeTheFileSystem() {
        XCTAssertNotNil(Zone.named("Asia/Kolkata"))
        for bad in ["", "/etc/passwd", "../zoneinfo/UTC", "Europe/../UTC", "Europe//Berlin", "Europe/Berlin/", ".", "zone.tab", "Europe", "Mars/Olympus", "Europe/Berlin\u{0}"] {
            XCTAssertNil(Zone.named(bad), bad)
        }
    }

    func testPosixRulesJulianAndOddTimes() throws {
        // J60 is March 1 in every year; n counts from 0 and counts February 29.
        let j = try XCTUnwrap(PosixTZ("AAA0BBB,J60/0,J300/0"))
        let n = try XCTUnwrap(PosixTZ("AAA0BBB,59/0,299/0"))
        for year in [2027, 2028] {
            XCTAssertEqual(j.transitions(year: year).map(\.0).first, CivilTime(year: year, month: 3, day: 1).seconds, "J60 \(year)")
        }
        XCTAssertEqual(n.transitions(year: 2027).map(\.0).first, CivilTime(year: 2027, month: 3, day: 1).seconds)
        XCTAssertEqual(n.transitions(year: 2028).map(\.0).first, CivilTime(year: 2028, month: 2, day: 29).seconds)
        // Times below zero and past 24 h (RFC 8536 §3.3.1): Jerusalem's M3.4.4/26 is Friday 02:00.
        let il = try XCTUnwrap(PosixTZ("IST-2IDT,M3.4.4/26,M10.5.0"))
        XCTAssertEqual(il.transitions(year: 2026).first?.0, CivilTime(year: 2026, month: 3, day: 27, hour: 0).seconds)
        let gl = try XCTUnwrap(PosixTZ("<-02>2<-01>,M3.5.0/-1,M10.5.0/0"))
        XCTAssertEqual(gl.transitions(year: 2026).first?.0, CivilTime(year: 2026, month: 3, day: 28, hour: 23 + 2).seconds)
        for bad in ["", "A0", "AAA", "AAA0BBB,M13.1.0,M1.1.0", "AAA0BBB,J0,J1", "AAA0BBB,M3.5.0/168,M10.5.0", "<AB>0", "AAA0BBB,M3.5.0"] {
            XCTAssertNil(PosixTZ(bad), bad)
        }
    }
}

extension Date {
    fileprivate var unix: Int64 { Int64(timeIntervalSince1970) }
}
