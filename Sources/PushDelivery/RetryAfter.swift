/// The `Retry-After` header (RFC 9110 §10.2.3): a number of seconds, or an HTTP date.
public enum RetryAfter {
    /// The absolute time (milliseconds since the epoch) a `Retry-After` value asks to wait
    /// for, or `nil` when it is absent or malformed (then only the back-off applies).
    ///
    /// Seconds are a run of digits (saturated: `99999999999999999999` waits "forever", which the
    /// retry window then turns into a discard). Dates are the IMF-fixdate form every sender
    /// must produce (`Sun, 06 Nov 1994 08:49:37 GMT`) and the two obsolete forms RFC 9110 asks
    /// recipients to accept (`Sunday, 06-Nov-94 08:49:37 GMT`, `Sun Nov  6 08:49:37 1994`).
    public static func parse(_ value: String?, now: Int64) -> Int64? {
        guard let value else { return nil }
        let text = value.trimmingSpaces()
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            var seconds: Int64 = 0
            for digit in text.utf8 {
                seconds = seconds.saturatingMultiplying(10).saturatingAdding(Int64(digit - UInt8(ascii: "0")))
            }
            return now.saturatingAdding(seconds.saturatingMultiplying(1000))
        }
        guard let seconds = httpDate(text) else { return nil }
        return seconds.saturatingMultiplying(1000)
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch of an HTTP date, or `nil`.
    static func httpDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        var day: Int64?, month: Int?, year: Int64?, time: String?
        if parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT" {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            day = Int64(parts[1])
            month = months.firstIndex(of: parts[2])
            year = Int64(parts[3])
            time = parts[4]
        } else if parts.count == 4, parts[0].hasSuffix(","), parts[3] == "GMT" {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let date = parts[1].split(separator: "-").map(String.init)
            guard date.count == 3, let shortYear = Int64(date[2]), date[2].count == 2 else { return nil }
            day = Int64(date[0])
            month = months.firstIndex(of: date[1])
            year = shortYear < 70 ? 2000 + shortYear : 1900 + shortYear
            time = parts[2]
        } else if parts.count == 5 {
            // asctime: Sun Nov  6 08:49:37 1994
            month = months.firstIndex(of: parts[1])
            day = Int64(parts[2])
            time = parts[3]
            year = Int64(parts[4])
        }
        guard let day, let month, let year, let time, (1...31).contains(day), (1970...9999).contains(year) else { return nil }
        let clock = time.split(separator: ":").map { Int64($0) }
        guard clock.count == 3, let hour = clock[0], let minute = clock[1], let second = clock[2],
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        return daysFromCivil(year: year, month: Int64(month + 1), day: day) * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// An IMF-fixdate for a time in seconds since the epoch (fakes and tests write them).
    public static func format(seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        // civil from days
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekday), \(two(day)) \(months[Int(month - 1)]) \(year) \(two(rest / 3_600)):\(two(rest % 3_600 / 60)):\(two(rest % 60)) GMT"
    }
}

extension String {
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
