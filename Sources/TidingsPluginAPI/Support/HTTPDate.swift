import FoundationEssentials
import Glibc

/// HTTP dates (RFC 9110 §5.6.7) without Foundation's `DateFormatter` (corelibs, ICU).
package enum HTTPDate {
    private static let weekdays = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// An IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`, as the `DateFormatter` pattern
    /// `EEE, dd MMM yyyy HH:mm:ss zzz` (en_US_POSIX) read it: names in any case, the comma after
    /// the weekday optional, runs of spaces, one- or two-digit day and time fields, the zone `GMT`
    /// or `UTC`. Nil for anything else, or a day or time out of range (`31 Feb`, `25:00:00`). The
    /// weekday must be a weekday name; it is not checked against the date. The year has four
    /// digits (DateFormatter read `15` as the year 15, in the Julian calendar).
    package static func parse(_ text: String) -> Date? {
        let words = text.split(separator: " ")
        guard words.count == 6, weekdays.contains(String(words[0].hasSuffix(",") ? words[0].dropLast() : words[0]).lowercased()),
            let day = number(words[1], digits: 1...2), let month = months.firstIndex(of: words[2].lowercased()),
            let year = number(words[3], digits: 4...4), ["gmt", "utc"].contains(words[5].lowercased())
        else { return nil }
        let clock = words[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, let hour = number(clock[0], digits: 1...2), let minute = number(clock[1], digits: 1...2),
            let second = number(clock[2], digits: 1...2), hour < 24, minute < 60, second < 60
        else { return nil }
        var tm = Glibc.tm()
        tm.tm_year = Int32(year - 1900)
        tm.tm_mon = Int32(month)
        tm.tm_mday = Int32(day)
        tm.tm_hour = Int32(hour)
        tm.tm_min = Int32(minute)
        tm.tm_sec = Int32(second)
        let seconds = timegm(&tm)
        // timegm normalises 31 Feb to 3 Mar: a day that moved was not a date.
        guard tm.tm_mday == Int32(day), tm.tm_mon == Int32(month) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func number(_ s: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(s.utf8.count), s.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int(s)
    }
}
