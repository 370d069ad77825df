/// The ranges a job spec's numbers must fall in, in one place for both ways a
/// spec is made: decoded from JSON (``FieldReader`` refuses a member out of its
/// range) and built in Swift (the dispatcher checks the same ranges at submit,
/// ``JobSpec/checkValues(path:)``). A value past its range is refused with the
/// field's path, never left to trap or hang a loop later (a negative timeout
/// turned into a timer's `UInt64`, a `maxConcurrency` of 0 that starts nothing).
public enum SpecBounds {
    /// `timeoutMs` of a step, `connectTimeoutMs` of a request.
    public static let timeoutMs = 1...Int.max
    /// `maxConcurrency` of a concurrent group.
    public static let maxConcurrency = 1...Int.max
    /// `retry.maxAttempts`.
    public static let retryAttempts = 1...100
    /// `retry.backoffMs`, `retry.maxBackoffMs`.
    public static let backoffMs = 0...Int.max
    /// `maxRedirects`.
    public static let maxRedirects = 0...50
    /// `cache.ttlSec` and a resource's `maxAgeSec`.
    public static let lifetimeSec = 0...Int.max
    /// `cache.staleIfErrorSec` (a year).
    public static let staleIfErrorSec = 0...31_536_000
    /// `repeat.everyMs` (a day).
    public static let repeatEveryMs = 1...86_400_000
    /// `repeat.maxTimes`.
    public static let repeatMaxTimes = 1...1_000_000

    /// Refuses `value` outside `range`, in the words ``FieldReader`` uses.
    static func check(_ value: Int?, _ range: ClosedRange<Int>, _ path: @autoclosure () -> String) throws(ValidationError) {
        guard let value else { return }
        if value < range.lowerBound { throw ValidationError(path: path(), "must be at least \(range.lowerBound)") }
        if value > range.upperBound { throw ValidationError(path: path(), "must be at most \(range.upperBound)") }
    }
}

extension FieldReader {
    /// Reads an integer member that must fall in `range`.
    public mutating func int(_ key: String, in range: ClosedRange<Int>) throws(ValidationError) -> Int? {
        try int(key, min: range.lowerBound, max: range.upperBound)
    }
}

extension JobSpec {
    /// Checks what JSON decoding checks of this node's own values (not its
    /// steps'): the ranges of ``SpecBounds``, and for a resource job the
    /// request members a resource cannot have and its digest's form. A spec
    /// decoded from JSON always passes; one built in Swift may not.
    /// `path` is the node's field path.
    func checkValues(path: String) throws(ValidationError) {
        try SpecBounds.check(timeoutMs, SpecBounds.timeoutMs, FieldReader.join(path, "timeoutMs"))
        switch body {
        case .remote(let remote):
            try remote.checkValues(path: path)
        case .resource(let resource):
            try resource.checkValues(path: path)
        case .concurrent(let group):
            try SpecBounds.check(group.maxConcurrency, SpecBounds.maxConcurrency, FieldReader.join(path, "maxConcurrency"))
        case .serial, .local, .named:
            break
        }
    }
}

extension RemoteSpec {
    /// The ranges of ``SpecBounds`` for a request's own members.
    func checkValues(path: String) throws(ValidationError) {
        try SpecBounds.check(connectTimeoutMs, SpecBounds.timeoutMs, FieldReader.join(path, "connectTimeoutMs"))
        try SpecBounds.check(maxRedirects, SpecBounds.maxRedirects, FieldReader.join(path, "maxRedirects"))
        try retry?.checkValues(path: FieldReader.join(path, "retry"))
        if let cache {
            try SpecBounds.check(cache.ttlSec, SpecBounds.lifetimeSec, FieldReader.join(path, "cache.ttlSec"))
            try SpecBounds.check(cache.staleIfErrorSec, SpecBounds.staleIfErrorSec, FieldReader.join(path, "cache.staleIfErrorSec"))
        }
        if let every = self.repeat {
            try SpecBounds.check(every.everyMs, SpecBounds.repeatEveryMs, FieldReader.join(path, "repeat.everyMs"))
            try SpecBounds.check(every.maxTimes, SpecBounds.repeatMaxTimes, FieldReader.join(path, "repeat.maxTimes"))
        }
    }
}

extension RetryPolicy {
    /// The ranges of ``SpecBounds`` for `retry` at `path` (a spec's, an api's, the defaults').
    func checkValues(path: String) throws(ValidationError) {
        try SpecBounds.check(maxAttempts, SpecBounds.retryAttempts, path + ".maxAttempts")
        try SpecBounds.check(backoffMs, SpecBounds.backoffMs, path + ".backoffMs")
        try SpecBounds.check(maxBackoffMs, SpecBounds.backoffMs, path + ".maxBackoffMs")
    }
}

extension ResourceSpec {
    /// A resource job's request is a GET without a body (resources.md §1): the
    /// members JSON refuses in one are refused here too, as is a digest that
    /// is not 64 hex digits.
    func checkValues(path: String) throws(ValidationError) {
        try request.checkValues(path: path)
        try SpecBounds.check(maxAgeSec, SpecBounds.lifetimeSec, FieldReader.join(path, "maxAgeSec"))
        if let name = request.refusedInResource {
            throw ValidationError(path: FieldReader.join(path, name), ResourceSpec.refusal(of: name))
        }
        if let sha256, sha256.utf8.count != 64 || !sha256.utf8.allSatisfy(\.isLowercaseHexDigit) {
            throw ValidationError(path: FieldReader.join(path, "sha256"), "expected 64 lowercase hex digits (a SHA-256)")
        }
    }
}

private extension RemoteSpec {
    /// The first member of ``ResourceSpec/refusedRemoteFields`` (in its order)
    /// set to what a resource job cannot do, or nil; `method` GET says what it
    /// does anyway. Fields tested directly: runs at every resource submit.
    var refusedInResource: String? {
        if let method, method != "GET", method.uppercased() != "GET" { return "method" }
        if body != nil { return "body" }
        if bodyEncoding != nil { return "bodyEncoding" }
        if dogma != nil { return "dogma" }
        if cache != nil { return "cache" }
        if saveAs != nil { return "saveAs" }
        if bodyFile != nil { return "bodyFile" }
        if contentMD5 != nil { return "contentMD5" }
        if gzipBody != nil { return "gzipBody" }
        if self.repeat != nil { return "repeat" }
        if coalesce != nil { return "coalesce" }
        return nil
    }
}

private extension UInt8 {
    var isLowercaseHexDigit: Bool { (48...57).contains(self) || (97...102).contains(self) }
}
