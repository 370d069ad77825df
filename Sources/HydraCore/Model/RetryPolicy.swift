import OrderedCollections

/// Retry policy of a remote job: `maxAttempts` counts every attempt, the first
/// included; the delay before attempt n+1 is `min(maxBackoffMs, backoffMs·2^(n-1))`
/// with equal jitter (between half and all of it).
///
/// A policy read from JSON remembers which fields it was given: the others
/// come from the next level (job < api < `defaults.retry` < built-in), see
/// ``filling(from:)``. One built in Swift gives all three.
public struct RetryPolicy: Sendable, Equatable {
    public var maxAttempts: Int { didSet { given.insert(.maxAttempts) } }
    public var backoffMs: Int { didSet { given.insert(.backoffMs) } }
    public var maxBackoffMs: Int { didSet { given.insert(.maxBackoffMs) } }

    /// The longest wait before a retry, whatever the policy's backoff or a
    /// server's `Retry-After` asks for: 10 minutes, so a hostile or broken peer
    /// (or a huge `maxBackoffMs`) cannot park a job for days.
    public static let maxDelayMs = 600_000

    /// The fields given (the rest hold built-in defaults until filled). A bit set:
    /// policies are resolved for every request, so no allocation.
    struct Field: OptionSet, Sendable {
        let rawValue: UInt8
        static let maxAttempts = Field(rawValue: 1)
        static let backoffMs = Field(rawValue: 2)
        static let maxBackoffMs = Field(rawValue: 4)
    }
    private(set) var given: Field = [.maxAttempts, .backoffMs, .maxBackoffMs]

    public init(maxAttempts: Int = 1, backoffMs: Int = 100, maxBackoffMs: Int = 5000) {
        self.maxAttempts = maxAttempts
        self.backoffMs = backoffMs
        self.maxBackoffMs = maxBackoffMs
    }

    /// A policy given only the non-nil fields (the others at the built-in values until filled).
    init(maxAttempts: Int?, backoffMs: Int?, maxBackoffMs: Int?) {
        let builtIn = RetryPolicy()
        self.init(maxAttempts: maxAttempts ?? builtIn.maxAttempts, backoffMs: backoffMs ?? builtIn.backoffMs,
                  maxBackoffMs: maxBackoffMs ?? builtIn.maxBackoffMs)
        given = []
        if maxAttempts != nil { given.insert(.maxAttempts) }
        if backoffMs != nil { given.insert(.backoffMs) }
        if maxBackoffMs != nil { given.insert(.maxBackoffMs) }
    }

    /// This policy, its missing fields taken from `base`.
    public func filling(from base: RetryPolicy) -> RetryPolicy {
        var filled = base
        if given.contains(.maxAttempts) { filled.maxAttempts = maxAttempts }
        if given.contains(.backoffMs) { filled.backoffMs = backoffMs }
        if given.contains(.maxBackoffMs) { filled.maxBackoffMs = maxBackoffMs }
        filled.given = given.union(base.given)
        return filled
    }

    /// Equal when the three values are: what was given does not matter.
    public static func == (a: RetryPolicy, b: RetryPolicy) -> Bool {
        a.maxAttempts == b.maxAttempts && a.backoffMs == b.backoffMs && a.maxBackoffMs == b.maxBackoffMs
    }

    /// The un-jittered delay before attempt `attempt + 1`, after `attempt` attempts,
    /// at most ``maxDelayMs``. Worked out in floating point and capped before it
    /// becomes an `Int`: a `maxBackoffMs` near `Int.max` is `2^63` as a `Double`,
    /// which no `Int` holds (a peer's policy of `Int.max` stopped the process).
    public func baseDelayMs(afterAttempt attempt: Int) -> Int {
        let exponent = min(max(attempt - 1, 0), 30)
        let delay = Double(max(backoffMs, 0)) * Double(1 << exponent)
        return Int(min(Double(max(maxBackoffMs, 0)), delay, Double(RetryPolicy.maxDelayMs)))
    }

    /// The delay with equal jitter: uniformly between half and all of the base delay.
    public func delayMs(afterAttempt attempt: Int) -> Int {
        let base = baseDelayMs(afterAttempt: attempt)
        guard base > 1 else { return base }
        return base / 2 + Int.random(in: 0...(base - base / 2))
    }
}
