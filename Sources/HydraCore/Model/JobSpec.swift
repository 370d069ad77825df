import OrderedCollections

/// A job as protocol §4 describes it: one HTTP request, a named local job,
/// a serial or concurrent group of steps, or a named job graph, plus the
/// fields every spec may carry.
///
/// Specs are decoded once (``JobSpec/init(json:path:)``) into these typed
/// values; strings may still hold `${…}` references, resolved when the step starts.
public struct JobSpec: Sendable {
    /// A name unique within its graph, used in `steps.ID` references.
    public var id: String?
    /// The worker to run on; default: the first worker of the fitting kind.
    public var worker: String?
    /// Time limit for the job, in milliseconds (a remote job: per attempt).
    public var timeoutMs: Int?
    /// What the job does.
    public var body: Body

    public indirect enum Body: Sendable {
        case remote(RemoteSpec)
        case local(LocalSpec)
        case serial(GroupSpec)
        case concurrent(GroupSpec)
        case named(NamedJobSpec)
    }

    public init(id: String? = nil, worker: String? = nil, timeoutMs: Int? = nil, _ body: Body) {
        self.id = id
        self.worker = worker
        self.timeoutMs = timeoutMs
        self.body = body
    }

    /// The spec's `type` as written in JSON.
    public var typeName: String {
        switch body {
        case .remote: return "remote"
        case .local: return "local"
        case .serial: return "serial"
        case .concurrent: return "concurrent"
        case .named: return "job"
        }
    }

    /// The job kind a worker must serve to run this spec; nil for groups.
    public var kind: JobKind? {
        switch body {
        case .remote: return .remote
        case .local: return .local
        default: return nil
        }
    }

    // MARK: Convenience constructors for Swift users

    public static func remote(_ spec: RemoteSpec, id: String? = nil) -> JobSpec { JobSpec(id: id, .remote(spec)) }
    public static func local(_ name: String, input: JSONValue = .null, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .local(LocalSpec(name: name, input: input)))
    }
    public static func serial(_ steps: [JobSpec], stopWhenFailed: Bool = true, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .serial(GroupSpec(steps: steps, stopWhenFailed: stopWhenFailed)))
    }
    public static func concurrent(_ steps: [JobSpec], maxConcurrency: Int? = nil, stopWhenFailed: Bool = false,
                                  id: String? = nil) -> JobSpec {
        JobSpec(id: id, .concurrent(GroupSpec(steps: steps, stopWhenFailed: stopWhenFailed, maxConcurrency: maxConcurrency)))
    }
    public static func named(_ name: String, input: JSONValue? = nil, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .named(NamedJobSpec(name: name, input: input)))
    }
}

/// The kind of work a worker serves.
public enum JobKind: String, Sendable, Hashable, CaseIterable {
    case remote, local

    /// A dense index (0..<allCases.count) for table lookups.
    var index: Int {
        switch self {
        case .remote: return 0
        case .local: return 1
        }
    }
}

/// One HTTP request (`"type": "remote"`).
public struct RemoteSpec: Sendable {
    public var method: String?
    public var url: String?
    public var server: String?
    public var endpoint: String?
    public var api: String?
    public var pathVars: OrderedDictionary<String, JSONValue> = [:]
    public var query: OrderedDictionary<String, JSONValue> = [:]
    public var headers: OrderedDictionary<String, JSONValue> = [:]
    public var body: JSONValue?
    public var bodyEncoding: BodyEncoding?
    public var dogma: String?
    public var expect: [Int]?
    public var retry: RetryPolicy?
    public var cache: CacheSpec?
    public var saveAs: String?
    /// Extension: limit for connecting, in milliseconds.
    public var connectTimeoutMs: Int?
    /// Extension: redirects to follow (default from config, else 5).
    public var maxRedirects: Int?

    public init(method: String? = nil, url: String? = nil, server: String? = nil, endpoint: String? = nil,
                api: String? = nil) {
        self.method = method
        self.url = url
        self.server = server
        self.endpoint = endpoint
        self.api = api
    }

    public static func get(_ url: String) -> RemoteSpec { RemoteSpec(method: "GET", url: url) }
}

/// How a remote job's `body` is sent.
public enum BodyEncoding: String, Sendable, CaseIterable {
    case json, form, text, base64
}

/// Response-cache use of one remote job.
public struct CacheSpec: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable { case use, refresh, bypass, only }
    public var mode: Mode
    public var ttlSec: Int?
    public init(mode: Mode, ttlSec: Int? = nil) {
        self.mode = mode
        self.ttlSec = ttlSec
    }
}

/// A named local job (`"type": "local"`).
public struct LocalSpec: Sendable {
    public var name: String
    public var input: JSONValue
    public init(name: String, input: JSONValue = .null) {
        self.name = name
        self.input = input
    }
}

/// The steps of a serial or concurrent group.
public struct GroupSpec: Sendable {
    public var steps: [JobSpec]
    /// Serial default true (later steps usually need earlier results); concurrent default false.
    public var stopWhenFailed: Bool
    /// Concurrent groups only: steps running at once (nil: all).
    public var maxConcurrency: Int?
    public init(steps: [JobSpec], stopWhenFailed: Bool, maxConcurrency: Int? = nil) {
        self.steps = steps
        self.stopWhenFailed = stopWhenFailed
        self.maxConcurrency = maxConcurrency
    }
}

/// A job graph from the jobs folder (`"type": "job"`).
public struct NamedJobSpec: Sendable {
    public var name: String
    /// The input its steps see as `${input.…}` (references resolved against the caller's scope).
    public var input: JSONValue?
    /// The loaded graph, filled in when the spec is submitted.
    public var resolved: JobSpec?
    public init(name: String, input: JSONValue? = nil) {
        self.name = name
        self.input = input
    }
}

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

    /// The un-jittered delay before attempt `attempt + 1`, after `attempt` attempts.
    public func baseDelayMs(afterAttempt attempt: Int) -> Int {
        let exponent = min(max(attempt - 1, 0), 30)
        let delay = Double(backoffMs) * Double(1 << exponent)
        return Int(min(Double(maxBackoffMs), delay))
    }

    /// The delay with equal jitter: uniformly between half and all of the base delay.
    public func delayMs(afterAttempt attempt: Int) -> Int {
        let base = baseDelayMs(afterAttempt: attempt)
        guard base > 1 else { return base }
        return base / 2 + Int.random(in: 0...(base - base / 2))
    }
}
