/// The rules of one time zone as a TZif file (RFC 8536) holds them: transition instants, the
/// local time types they switch to, and the footer's POSIX TZ rule for instants after the last
/// transition. Immutable; instants are whole seconds after the Unix epoch.
package struct ZoneRules: Sendable, Equatable {
    /// A local time type: UTC offset in seconds (east positive), DST flag, abbreviation.
    package struct LocalType: Sendable, Equatable, Hashable {
        package var offset: Int
        package var isDST: Bool
        package var abbreviation: String
        package init(offset: Int, isDST: Bool, abbreviation: String) {
            (self.offset, self.isDST, self.abbreviation) = (offset, isDST, abbreviation)
        }
    }

    /// Instants at which the type changes, ascending.
    var transitions: [Int64]
    /// For each transition, the index into ``types`` it switches to.
    var transitionTypes: [Int]
    /// Local time types; type 0 applies before the first transition (RFC 8536 §3.2).
    var types: [LocalType]
    /// For instants after the last transition (or all instants when there are none).
    var footer: PosixTZ?

    init(transitions: [Int64], transitionTypes: [Int], types: [LocalType], footer: PosixTZ?) {
        (self.transitions, self.transitionTypes, self.types, self.footer) = (transitions, transitionTypes, types, footer)
    }

    /// A zone that always has one type (UTC, or a POSIX TZ string without DST).
    init(fixed type: LocalType) { self.init(transitions: [], transitionTypes: [], types: [type], footer: nil) }

    /// The local time type in effect at `instant`.
    package func type(at instant: Int64) -> LocalType {
        guard let last = transitions.last else { return footer?.type(at: instant) ?? types[0] }
        if instant >= last, let footer { return footer.type(at: instant) }
        let n = count(atOrBefore: instant)
        return n == 0 ? types[0] : types[transitionTypes[n - 1]]
    }

    /// How many table transitions lie at or before `instant` (binary search).
    private func count(atOrBefore instant: Int64) -> Int {
        var (lo, hi) = (0, transitions.count)
        while lo < hi {
            let mid = (lo + hi) / 2
            if transitions[mid] <= instant { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The instants in `range` at which the local time type changes (offset, DST flag or
    /// abbreviation), with the type that starts there; from the table and from the footer rule.
    package func transitions(in range: ClosedRange<Int64>) -> [(at: Int64, type: LocalType)] {
        var out: [(at: Int64, type: LocalType)] = []
        var previous = type(at: range.lowerBound)
        for i in count(atOrBefore: range.lowerBound)..<count(atOrBefore: range.upperBound) {
            let ty = types[transitionTypes[i]]
            let t = transitions[i]
            if ty != previous { out.append((t, ty)) }
            previous = ty
        }
        if let footer, footer.dst != nil {
            let from = max(range.lowerBound, transitions.last ?? range.lowerBound)
            guard from <= range.upperBound else { return out }
            let firstYear = CivilTime(seconds: from).year - 1
            let lastYear = CivilTime(seconds: range.upperBound).year + 1
            for year in firstYear...lastYear {
                for (t, ty) in footer.transitions(year: year) where t > from && range.contains(t) {
                    if ty != previous { out.append((t, ty)) }
                    previous = ty
                }
            }
        }
        return out
    }

    /// The instant at which the wall clock shows `local` (seconds after 1970-01-01T00:00:00 on
    /// that clock). A repeated time is its first occurrence; a time skipped by a change is
    /// taken as the next time that exists, the instant of the change (02:30 in a 02:00→03:00
    /// gap is 03:00), as Foundation's `Calendar` with `.nextTime` and `.first` had it.
    package func instant(forLocal local: Int64) -> Int64 {
        let window: Int64 = 2 * 86_400
        let before = type(at: local - window)
        let changes = transitions(in: (local - window)...(local + window))
        var offsets = [before.offset]
        for c in changes where !offsets.contains(c.type.offset) { offsets.append(c.type.offset) }
        let exact = offsets.map { local - Int64($0) }.filter { Int64(type(at: $0).offset) == local - $0 }
        if let first = exact.min() { return first }
        // In a gap: the change whose skipped wall times hold `local`.
        var previous = before.offset
        for c in changes {
            if c.at + Int64(previous) <= local && local < c.at + Int64(c.type.offset) { return c.at }
            previous = c.type.offset
        }
        return local - Int64(type(at: local).offset)
    }
}

extension ZoneRules {
    package enum ParseError: Error, Equatable { case notTZif, truncated, badFooter }

    /// Parses a TZif file, versions 1 to 4: the 64-bit block of version 2 and later when there
    /// is one (the 32-bit block otherwise), and the footer. Leap-second records are skipped.
    package init(tzif bytes: [UInt8]) throws(ParseError) {
        var r = ByteReader(bytes: bytes)
        func header() throws(ParseError) -> (version: UInt8, counts: [Int]) {
            guard r.take(4) == Array("TZif".utf8), let version = r.byte() else { throw .notTZif }
            guard r.skip(15) else { throw .truncated }
            var counts: [Int] = []
            for _ in 0..<6 {
                guard let c = r.uint32() else { throw .truncated }
                counts.append(Int(c))
            }
            return (version, counts)
        }
        func block(timeSize: Int, _ counts: [Int]) throws(ParseError) -> ZoneRules {
            let (isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt) = (counts[0], counts[1], counts[2], counts[3], counts[4], counts[5])
            guard typecnt > 0 else { throw .notTZif }
            var times: [Int64] = []
            times.reserveCapacity(timecnt)
            for _ in 0..<timecnt {
                guard let t = timeSize == 8 ? r.int64() : r.uint32().map({ Int64(Int32(bitPattern: $0)) }) else { throw .truncated }
                times.append(t)
            }
            var indices: [Int] = []
            for _ in 0..<timecnt {
                guard let i = r.byte(), Int(i) < typecnt else { throw .truncated }
                indices.append(Int(i))
            }
            var raw: [(Int, Bool, Int)] = []
            for _ in 0..<typecnt {
                guard let off = r.uint32(), let dst = r.byte(), let idx = r.byte() else { throw .truncated }
                raw.append((Int(Int32(bitPattern: off)), dst != 0, Int(idx)))
            }
            guard let chars = r.take(charcnt), r.skip(leapcnt * (timeSize + 4) + isstdcnt + isutcnt) else { throw .truncated }
            let types = raw.map { off, dst, idx in
                let tail = idx < chars.count ? chars[idx...] : []
                let name = tail.prefix { $0 != 0 }
                return LocalType(offset: off, isDST: dst, abbreviation: String(decoding: name, as: UTF8.self))
            }
            return ZoneRules(transitions: times, transitionTypes: indices, types: types, footer: nil)
        }
        let first = try header()
        let v1 = try block(timeSize: 4, first.counts)
        guard first.version >= UInt8(ascii: "2") else {
            self = v1
            return
        }
        let second = try header()
        var rules = try block(timeSize: 8, second.counts)
        // Footer: "\n" TZ-string "\n"; an empty string means no rule.
        guard r.byte() == UInt8(ascii: "\n"), let end = r.rest.firstIndex(of: UInt8(ascii: "\n")) else { throw .badFooter }
        let text = String(decoding: r.rest[..<end], as: UTF8.self)
        if !text.isEmpty {
            guard let footer = PosixTZ(text) else { throw .badFooter }
            rules.footer = footer
        }
        self = rules
    }
}

/// A POSIX TZ string (`CET-1CEST,M3.5.0,M10.5.0/3`, `<+1030>-10:30<+11>-11,M10.1.0,M4.1.0`,
/// `IST-5:30`) with the RFC 8536 §3.3.1 extensions: transition times from -167 to 167 hours.
package struct PosixTZ: Sendable, Equatable {
    package enum Day: Sendable, Equatable {
        /// `Jn`: 1…365, February 29 never counted.
        case julian1(Int)
        /// `n`: 0…365, February 29 counted in leap years.
        case julian0(Int)
        /// `Mm.w.d`: day d (0 = Sunday) of week w (1…5, 5 = the last) of month m.
        case month(Int, Int, Int)

        /// Days after 1970-01-01 of this day in `year`.
        func days(in year: Int) -> Int64 {
            switch self {
            case .julian1(let n):
                // Day n of a 365-day year: March 1 is day 60 whether or not the year is leap.
                return CivilTime.days(year: year, month: 1, day: 1) + Int64(n - 1) + (CivilTime.isLeap(year) && n >= 60 ? 1 : 0)
            case .julian0(let n):
                return CivilTime.days(year: year, month: 1, day: 1) + Int64(n)
            case .month(let m, let w, let d):
                let first = CivilTime.days(year: year, month: m, day: 1)
                let firstWeekday = CivilTime.weekday(days: first) - 1  // 0 = Sunday
                var day = 1 + (d - firstWeekday + 7) % 7 + (w - 1) * 7
                let length = CivilTime.daysIn(month: m, year: year)
                while day > length { day -= 7 }
                return first + Int64(day - 1)
            }
        }
    }

    package struct Rule: Sendable, Equatable {
        package var day: Day
        /// Local wall time of the change, seconds (may be negative or past 24 h).
        package var time: Int
    }

    package var std: ZoneRules.LocalType
    package var dst: ZoneRules.LocalType?
    package var start: Rule
    package var end: Rule

    /// The two changes in `year`, in instant order: to DST at `start` (given in standard time),
    /// back at `end` (given in daylight time).
    func transitions(year: Int) -> [(Int64, ZoneRules.LocalType)] {
        guard let dst else { return [] }
        let on = start.day.days(in: year) * 86_400 + Int64(start.time - std.offset)
        let off = end.day.days(in: year) * 86_400 + Int64(end.time - dst.offset)
        return on <= off ? [(on, dst), (off, std)] : [(off, std), (on, dst)]
    }

    func type(at instant: Int64) -> ZoneRules.LocalType {
        guard dst != nil else { return std }
        let year = CivilTime(seconds: instant + Int64(std.offset)).year
        var current = std
        // Changes of the year before settle which type the year starts in.
        for y in (year - 1)...(year + 1) {
            for (t, ty) in transitions(year: y) where t <= instant { current = ty }
        }
        return current
    }

    /// Parses a TZ string; nil when it is not one.
    package init?(_ text: String) {
        var s = Substring(text)
        func name() -> String? {
            if s.first == "<" {
                guard let close = s.firstIndex(of: ">") else { return nil }
                let n = s[s.index(after: s.startIndex)..<close]
                s = s[s.index(after: close)...]
                return n.count >= 3 && n.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-") }) ? String(n) : nil
            }
            let n = s.prefix { $0.isASCII && $0.isLetter }
            s = s[n.endIndex...]
            return n.count >= 3 ? String(n) : nil
        }
        /// `[+-]hh[:mm[:ss]]` in seconds; hours up to `maxHours`.
        func clock(maxHours: Int) -> Int? {
            var sign = 1
            if s.first == "+" || s.first == "-" {
                sign = s.first == "-" ? -1 : 1
                s = s.dropFirst()
            }
            var parts: [Int] = []
            while parts.count < 3 {
                let digits = s.prefix { $0.isASCII && $0.isNumber }
                guard !digits.isEmpty, digits.count <= 3, let v = Int(digits) else { return nil }
                parts.append(v)
                s = s[digits.endIndex...]
                guard s.first == ":" else { break }
                s = s.dropFirst()
            }
            guard parts[0] <= maxHours, parts.dropFirst().allSatisfy({ $0 < 60 }) else { return nil }
            return sign * (parts[0] * 3600 + (parts.count > 1 ? parts[1] * 60 : 0) + (parts.count > 2 ? parts[2] : 0))
        }
        func number() -> Int? {
            let digits = s.prefix { $0.isASCII && $0.isNumber }
            s = s[digits.endIndex...]
            return digits.isEmpty || digits.count > 3 ? nil : Int(digits)
        }
        func rule() -> Rule? {
            let day: Day
            if s.first == "J" {
                s = s.dropFirst()
                guard let n = number(), (1...365).contains(n) else { return nil }
                day = .julian1(n)
            } else if s.first == "M" {
                s = s.dropFirst()
                guard let m = number(), (1...12).contains(m), s.first == "." else { return nil }
                s = s.dropFirst()
                guard let w = number(), (1...5).contains(w), s.first == "." else { return nil }
                s = s.dropFirst()
                guard let d = number(), (0...6).contains(d) else { return nil }
                day = .month(m, w, d)
            } else {
                guard let n = number(), (0...365).contains(n) else { return nil }
                day = .julian0(n)
            }
            var time = 7200
            if s.first == "/" {
                s = s.dropFirst()
                guard let t = clock(maxHours: 167) else { return nil }
                time = t
            }
            return Rule(day: day, time: time)
        }
        guard let stdName = name(), let stdOffset = clock(maxHours: 24) else { return nil }
        std = .init(offset: -stdOffset, isDST: false, abbreviation: stdName)
        // Without DST, or US rules when a DST name comes without them (as glibc).
        (start, end) = (Rule(day: .month(3, 2, 0), time: 7200), Rule(day: .month(11, 1, 0), time: 7200))
        if s.isEmpty {
            dst = nil
            return
        }
        guard let dstName = name() else { return nil }
        var dstOffset = std.offset + 3600
        if let f = s.first, f != "," {
            guard let o = clock(maxHours: 24) else { return nil }
            dstOffset = -o
        }
        dst = .init(offset: dstOffset, isDST: true, abbreviation: dstName)
        if s.first == "," {
            s = s.dropFirst()
            guard let a = rule(), s.first == "," else { return nil }
            s = s.dropFirst()
            guard let b = rule() else { return nil }
            (start, end) = (a, b)
        }
        guard s.isEmpty else { return nil }
    }
}

/// Big-endian reads over a byte array, nil past the end.
struct ByteReader {
    let bytes: [UInt8]
    var at = 0
    init(bytes: [UInt8]) { self.bytes = bytes }

    var rest: ArraySlice<UInt8> { bytes[at...] }

    mutating func take(_ n: Int) -> [UInt8]? {
        guard n >= 0, bytes.count - at >= n else { return nil }
        defer { at += n }
        return Array(bytes[at..<at + n])
    }
    mutating func skip(_ n: Int) -> Bool { take(n) != nil }
    mutating func byte() -> UInt8? { take(1)?[0] }
    mutating func uint32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
    mutating func int64() -> Int64? { take(8).map { Int64(bitPattern: $0.reduce(0) { $0 << 8 | UInt64($1) }) } }
}
