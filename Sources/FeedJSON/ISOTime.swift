package import Foundation

/// Formats times as ISO 8601 UTC with milliseconds by arithmetic alone: no formatter object, no time-zone
/// database (`gmtime_r` would read `/etc/localtime` on first use), so a page of 50 times costs microseconds.
package enum ISOTime {
    /// `2020-09-13T12:26:40.000Z`.
    package static func format(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let (days, dayMillis) = floorDivision(millis, 86_400_000)
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        if year < 0 || year > 9999 {
            // Outside the four-digit range (never for a real database): a sign and the full year.
            bytes.append(contentsOf: Array(String(year).utf8))
        } else {
            append(year, width: 4, to: &bytes)
        }
        bytes.append(UInt8(ascii: "-"))
        append(month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(day, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        append(dayMillis / 3_600_000, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(dayMillis / 60_000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(dayMillis / 1000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        append(dayMillis % 1000, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `2020-09-13 12:26` in UTC, for text tables.
    package static func short(_ date: Date) -> String {
        String(format(date).prefix(16)).replacingOccurrences(of: "T", with: " ")
    }

    /// Quotient rounded towards negative infinity, and the non-negative remainder.
    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01, computed over 400-year eras (146,097 days
    /// each) counted from 0000-03-01, so that the leap day is the last day of its year.
    private static func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = daysSinceEpoch + 719_468  // days from 0000-03-01 to 1970-01-01
        let era = floorDivision(shifted, 146_097).quotient
        let dayOfEra = shifted - era * 146_097  // 0...146096
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // 0...399
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // 0...365, from March 1
        let monthFromMarch = (5 * dayOfYear + 2) / 153  // 0...11
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// Appends `value` (non-negative) in decimal, zero-padded to `width` digits.
    private static func append(_ value: Int64, width: Int, to bytes: inout [UInt8]) {
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: width)
        var rest = value
        var index = width - 1
        while rest > 0, index >= 0 {
            digits[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            index -= 1
        }
        bytes.append(contentsOf: digits)
    }
}
