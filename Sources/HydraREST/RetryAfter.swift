import Foundation
import HydraCore
import HydraHTTP

/// A `Retry-After` field (RFC 9110 §10.2.3) from a peer, as the wait before
/// the next attempt: delay-seconds or an HTTP-date.
///
/// Protocol §4 says retries honour `Retry-After`, so the server's wait is
/// taken as given, even when it is longer than the retry policy's
/// `maxBackoffMs` (that bounds Hydra's own backoff, not the peer's request).
/// The value still comes from the network, so it is read without trusting
/// it: the seconds saturate instead of overflowing (a peer once sent
/// `9999999999999999` and the multiplication by 1000 trapped the process),
/// a date in the past is no wait, and every wait stops at `ceilingMs`, so a
/// hostile or broken peer cannot park a job for days. Pure; thread-safe.
enum RetryAfter {
    /// The longest wait before a retry (``RetryPolicy/maxDelayMs``).
    static let ceilingMs = RetryPolicy.maxDelayMs

    /// The wait `value` asks for in milliseconds, within `0...cap` (the
    /// ceiling unless a test asks for another); nil when `value` is neither
    /// delay-seconds nor an HTTP-date (the usual backoff applies).
    static func milliseconds(_ value: String, cap: Int = ceilingMs, now: Double = Date().timeIntervalSince1970) -> Int? {
        let cap = max(0, cap)
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = delaySeconds(trimmed, saturatingAt: cap / 1000 + 1) {
            let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
            return overflow ? cap : min(cap, ms)
        }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        let milliseconds = (date - now) * 1000
        guard milliseconds.isFinite, milliseconds > 0 else { return 0 }
        return milliseconds >= Double(cap) ? cap : Int(milliseconds)
    }

    /// `1*DIGIT` as a number no larger than `limit` (larger values give `limit`), else nil.
    private static func delaySeconds(_ text: String, saturatingAt limit: Int) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            if value < limit { value = value * 10 + Int(byte - 0x30) }
        }
        return min(value, limit)
    }
}
