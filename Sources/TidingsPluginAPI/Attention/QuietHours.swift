import FoundationEssentials

/// A route's `quiet_hours`: a daily window (which may wrap past midnight) on some weekdays, in
/// a time zone. Events routed inside it are held in the outbox until it ends (DESIGN §10).
package struct QuietHours: Sendable, Equatable {
    /// A time of day, seconds after midnight (`"22:00"`, `"07:30:15"`).
    package struct TimeOfDay: Sendable, Equatable, CustomStringConvertible {
        package var seconds: Int
        package init(seconds: Int) { self.seconds = seconds }

        /// `HH:MM` or `HH:MM:SS` (24-hour clock). Seconds are for tests that need a window a few
        /// seconds long.
        package init?(_ text: String) {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard (2...3).contains(parts.count), parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
                let h = Int(parts[0]), let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m)
            else { return nil }
            let s = parts.count == 3 ? Int(parts[2]) : 0
            guard let s, (0..<60).contains(s) else { return nil }
            seconds = h * 3600 + m * 60 + s
        }

        package var description: String {
            let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
            let hm = CivilTime.pad(h) + ":" + CivilTime.pad(m)
            return s == 0 ? hm : hm + ":" + CivilTime.pad(s)
        }
    }

    /// Days as ``CivilTime/weekday``: 1 = Sunday … 7 = Saturday.
    package static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    static let fullDayNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]

    package var start: TimeOfDay
    package var end: TimeOfDay
    /// The weekdays (1 = Sunday … 7) on which a window *starts*; a window from 22:00 to 07:00
    /// that starts on Friday ends on Saturday morning. All days when the list is not given.
    package var days: Set<Int>
    package var timeZone: Zone

    package init(start: TimeOfDay, end: TimeOfDay, days: Set<Int> = Set(1...7), timeZone: Zone = .current) {
        self.start = start
        self.end = end
        self.days = days
        self.timeZone = timeZone
    }

    /// When the window that contains `date` ends, or nil when `date` is outside every window.
    /// Wall-clock times are taken in ``timeZone``; on a day whose clocks change, a time that
    /// does not exist is taken as the next one that does.
    package func end(ofWindowContaining date: Date) -> Date? {
        guard start != end else { return nil }
        let today = timeZone.civil(at: date)
        let todayNumber = CivilTime.days(year: today.year, month: today.month, day: today.day)
        // The window starting today, or the one that started yesterday and wraps past midnight.
        for offset: Int64 in [0, -1] {
            let day = todayNumber + offset
            guard days.contains(CivilTime.weekday(days: day)) else { continue }
            let from = at(start, on: day)
            let to = at(end, on: end.seconds > start.seconds ? day : day + 1)
            if from <= date && date < to { return to }
        }
        return nil
    }

    /// The instant the clock shows `t` on the day `day` days after 1970-01-01.
    private func at(_ t: TimeOfDay, on day: Int64) -> Date {
        timeZone.date(of: CivilTime(seconds: day * 86_400 + Int64(t.seconds)))
    }

    /// How the window reads in messages: `22:00–07:00 Europe/Stockholm (mon, tue)`.
    package var description: String {
        let d = days.count == 7 ? "" : " (" + days.sorted().map { Self.dayNames[$0 - 1] }.joined(separator: ", ") + ")"
        return "\(start)–\(end) \(timeZone.identifier)\(d)"
    }

    /// Reads `quiet_hours = { start = "22:00", end = "07:00", days = ["mon", …], timezone = "…" }`.
    package static func option(_ r: OptionReader, _ key: String = "quiet_hours") throws -> QuietHours? {
        guard let t = try r.subtable(key) else { return nil }
        let what = t.what
        func time(_ k: String) throws -> TimeOfDay {
            let s = try t.requiredString(k)
            guard let v = TimeOfDay(s) else { throw t.error(k, "\(what): '\(k)' must be a time of day like \"22:00\" (or \"22:00:30\"), not \"\(s)\"") }
            return v
        }
        var q = QuietHours(start: try time("start"), end: try time("end"))
        if q.start == q.end { throw t.error("end", "\(what): 'start' and 'end' are the same time: the window would be empty") }
        if let list = try t.stringList("days") {
            var days = Set<Int>()
            for d in list {
                let word = d.lowercased()
                guard let i = dayNames.firstIndex(where: { word == $0 || word == Self.fullDayNames[dayNames.firstIndex(of: $0)!] }) else {
                    throw t.error("days", "\(what): unknown day '\(d)' (mon, tue, wed, thu, fri, sat, sun)")
                }
                days.insert(i + 1)
            }
            if days.isEmpty { throw t.error("days", "\(what): 'days' is empty: the window would never apply") }
            q.days = days
        }
        if let tz = try t.string("timezone") {
            guard let zone = Zone.named(tz) else {
                throw t.error("timezone", "\(what): unknown time zone '\(tz)' (an IANA name like \"Europe/Stockholm\")")
            }
            q.timeZone = zone
        }
        try t.finish()
        return q
    }
}

extension Zone {
    /// The wall time at `date` (its fraction of a second dropped).
    package func civil(at date: Date) -> CivilTime { civil(at: Int64(date.timeIntervalSince1970.rounded(.down))) }

    /// ``instant(of:)`` as a `Date`.
    package func date(of wall: CivilTime) -> Date { Date(timeIntervalSince1970: Double(instant(of: wall))) }
}
