import Foundation

@testable import Hydra

/// A time as the protocol writes every time (`2026-11-22T10:00:00.123Z`:
/// ISO-8601 UTC with milliseconds), in seconds since 1970; nil for anything
/// else (a number, another format), so a test fails on the shape too.
func wireTime(_ value: JSONValue?) -> Double? {
    guard let text = value?.stringValue,
          text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil else { return nil }
    let parser = ISO8601DateFormatter()
    parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return parser.date(from: text)?.timeIntervalSince1970
}
