import Foundation

/// An HTTP-date (RFC 9110 §5.6.7) as a peer sends it, read without trusting it.
///
/// Reads the three forms a recipient must accept: IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
/// Every number is bounded as it is read (at most four digits), so no value a
/// peer can send overflows; anything else is nil. Pure and thread-safe: no
/// `DateFormatter` (not Sendable, and costly to make per response).
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970 (UTC) of `text`, or nil when it is not an HTTP-date.
    public static func parse(_ text: String) -> Double? {
        // Words split at spaces, commas, dashes and colons: every form becomes
        // a list of names and numbers in one of three orders.
        var words: [Substring] = []
        var start: String.Index?
        for index in text.indices {
            let c = text[index]
            if c == " " || c == "," || c == "-" || c == ":" || c == "\t" {
                if let s = start { words.append(text[s..<index]); start = nil }
            } else if start == nil {
                start = index
            }
        }
        if let s = start { words.append(text[s...]) }

        let day, month, year, hour, minute, second: Int?
        switch words.count {
        case 8 where words[7] == "GMT":
            // IMF-fixdate / RFC 850: weekday, day, month, year, h, m, s, GMT
            day = number(words[1])
            month = monthNumber(words[2])
            if let y = number(words[3]) {
                // RFC 850 two-digit years: the nearest century not more than 50 years ahead.
                year = words[3].count == 2 ? (y < 70 ? 2000 + y : 1900 + y) : y
            } else {
                year = nil
            }
            (hour, minute, second) = (number(words[4]), number(words[5]), number(words[6]))
        case 7:
            // asctime: weekday, month, day, h, m, s, year
            month = monthNumber(words[1])
            day = number(words[2])
            (hour, minute, second) = (number(words[3]), number(words[4]), number(words[5]))
            year = number(words[6])
        default:
            return nil
        }
        guard let day, let month, let year, let hour, let minute, let second,
              (1...31).contains(day), (1...9999).contains(year), (0...23).contains(hour),
              (0...59).contains(minute), (0...60).contains(second) else { return nil }
        return Double(daysFromCivil(year: year, month: month, day: day)) * 86400
            + Double(hour * 3600 + minute * 60 + second)
    }

    /// A decimal of one to four digits, else nil (nothing longer is ever needed).
    private static func number(_ word: Substring) -> Int? {
        guard !word.isEmpty, word.count <= 4, isNumber(word) else { return nil }
        return word.unicodeScalars.reduce(0) { $0 * 10 + Int($1.value - 48) }
    }

    private static func isNumber(_ word: Substring) -> Bool {
        word.unicodeScalars.allSatisfy { $0.value >= 48 && $0.value <= 57 }
    }

    private static func monthNumber(_ word: Substring) -> Int? {
        months.firstIndex(of: word.lowercased()).map { $0 + 1 }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146097 + dayOfEra - 719468
    }
}
