/// Polling of one remote job (rest.md §5): the request is sent again every
/// `everyMs` after each response until the value at `path` of the result
/// equals `equals` (or differs from `notEquals`); after `maxTimes` rounds
/// without it, the job fails with kind `condition`.
public struct RepeatSpec: Sendable, Equatable {
    /// Milliseconds between a response and the next request (at least 1).
    public var everyMs: Int
    /// A dot path into the result (`body.state`, `status`).
    public var path: String
    /// The value that ends the polling, or (with ``negated``) the one that keeps it going.
    public var value: JSONValue
    /// True for `notEquals`.
    public var negated: Bool
    /// Rounds at most (default ``defaultMaxTimes``).
    public var maxTimes: Int

    /// Polls every `everyMs` until the value at `path` equals `value` (differs from it when `negated`).
    public init(everyMs: Int, path: String, equals value: JSONValue, negated: Bool = false,
                maxTimes: Int = RepeatSpec.defaultMaxTimes) {
        self.everyMs = everyMs
        self.path = path
        self.value = value
        self.negated = negated
        self.maxTimes = maxTimes
    }

    /// When `maxTimes` is not given: a poll is bounded by default.
    public static let defaultMaxTimes = 100

    /// Whether `result` ends the polling.
    public func isMet(by result: JSONValue) -> Bool {
        // A missing value counts as `null`: `"equals": null` waits for a field to be absent or null.
        let found = result.value(atPath: path) ?? .null
        return negated ? found != value : found == value
    }

    var json: JSONValue {
        ["everyMs": .int(everyMs), "maxTimes": .int(maxTimes),
         "until": .object(["path": .string(path), (negated ? "notEquals" : "equals"): value])]
    }
}

extension RepeatSpec {
    init(reader r: inout FieldReader) throws(ValidationError) {
        guard let everyMs = try r.int("everyMs", in: SpecBounds.repeatEveryMs) else {
            throw ValidationError(path: r.path("everyMs"), "required (milliseconds between rounds, at least 1)").refusingAbsence()
        }
        self.everyMs = everyMs
        maxTimes = try r.int("maxTimes", in: SpecBounds.repeatMaxTimes) ?? Self.defaultMaxTimes
        guard var until = try r.object("until") else {
            throw ValidationError(path: r.path("until"), "required: {\"path\", \"equals\" or \"notEquals\"}").refusingAbsence()
        }
        path = try until.requiredString("path")
        // Any JSON value, `null` included (polling until a field is null or no longer null).
        let equals = until.valueOrNull("equals"), notEquals = until.valueOrNull("notEquals")
        switch (equals, notEquals) {
        case (let value?, nil): self.value = value; negated = false
        case (nil, let value?): self.value = value; negated = true
        case (nil, nil): throw ValidationError(path: until.path("equals"), "required (or notEquals)")
        default: throw ValidationError(path: until.path("notEquals"), "give equals or notEquals, not both")
        }
        try until.rejectUnknownKeys()
        try r.rejectUnknownKeys()
    }
}
