/// Proleptic Gregorian calendar arithmetic on whole seconds, without Foundation's `Calendar`
/// (which needs ICU for anything but GMT): Howard Hinnant's days-from-civil algorithms.
package struct CivilTime: Sendable, Equatable, Hashable, CustomStringConvertible {
    package var year: Int
    /// 1…12
    package var month: Int
    /// 1…31
    package var day: Int
    package var hour: Int
    package var minute: Int
    package var second: Int

    package init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        (self.year, self.month, self.day, self.hour, self.minute, self.second) = (year, month, day, hour, minute, second)
    }

    /// The wall time that `seconds` after 1970-01-01T00:00:00 shows (local seconds: an instant
    /// plus its UTC offset).
    package init(seconds: Int64) {
        let days = Self.floorDiv(seconds, 86_400)
        let rest = Int(seconds - days * 86_400)
        (year, month, day) = Self.civil(fromDays: days)
        (hour, minute, second) = (rest / 3600, rest / 60 % 60, rest % 60)
    }

    /// Seconds after 1970-01-01T00:00:00 on this wall clock (fields out of range carry over).
    package var seconds: Int64 {
        Self.days(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// 1 = Sunday … 7 = Saturday (as `Calendar`'s `.weekday`).
    package var weekday: Int { Self.weekday(days: Self.days(year: year, month: month, day: day)) }

    /// `2026-11-23 07:00:00`
    package var description: String {
        "\(Self.pad(year, 4))-\(Self.pad(month))-\(Self.pad(day)) \(Self.pad(hour)):\(Self.pad(minute)):\(Self.pad(second))"
    }

    /// Days after 1970-01-01 of a proleptic Gregorian date; months outside 1…12 carry into years.
    package static func days(year: Int, month: Int, day: Int) -> Int64 {
        let m0 = month - 1
        let y = Int64(year) + floorDiv(Int64(m0), 12)
        let m = Int64(m0) - floorDiv(Int64(m0), 12) * 12 + 1  // 1…12
        let yy = m <= 2 ? y - 1 : y
        let era = floorDiv(yy, 400)
        let yoe = yy - era * 400  // 0…399
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date `days` after 1970-01-01.
    package static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDiv(z, 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(yoe + era * 400 + (m <= 2 ? 1 : 0)), Int(m), Int(d))
    }

    /// 1 = Sunday … 7 = Saturday for a day number (1970-01-01 was a Thursday).
    package static func weekday(days: Int64) -> Int { Int((days + 4) - floorDiv(days + 4, 7) * 7) + 1 }

    package static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    package static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `n` in decimal, zero-padded on the left to `width` digits (a `-` sign stays in front).
    package static func pad(_ n: Int, _ width: Int = 2) -> String {
        let digits = String(n.magnitude)
        return (n < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }
}
