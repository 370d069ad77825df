import OrderedCollections

/// Why a job failed (protocol §4): a kind clients can branch on, a message
/// for people, and for HTTP failures the status and decoded body.
public struct JobError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case network, timeout, http, decode, invalid, cancelled, tooLarge, `internal`
    }

    public var kind: Kind
    public var message: String
    /// The HTTP status, for kind `http` (and other failures that had a response).
    public var status: Int?
    /// The decoded response body of an `http` failure.
    public var body: JSONValue?
    /// The failing step inside a graph (`"1.0"`); nil for the job itself.
    public var stepPath: String?

    public init(_ kind: Kind, _ message: String, status: Int? = nil, body: JSONValue? = nil, stepPath: String? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
        self.body = body
        self.stepPath = stepPath
    }

    public var description: String {
        var text = "\(kind.rawValue): \(message)"
        if let stepPath, !stepPath.isEmpty { text += " (step \(stepPath))" }
        return text
    }

    /// The error as protocol JSON: `{"kind", "message", "status"?, "body"?, "stepPath"?}`.
    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = ["kind": .string(kind.rawValue), "message": .string(message)]
        if let status { o["status"] = .int(status) }
        if let body { o["body"] = body }
        if let stepPath { o["stepPath"] = .string(stepPath) }
        return .object(o)
    }

    /// Reads the JSON form back (used by clients and the store).
    public init?(json: JSONValue) {
        guard let kindText = json["kind"]?.stringValue, let kind = Kind(rawValue: kindText) else { return nil }
        self.init(kind, json["message"]?.stringValue ?? "", status: json["status"]?.intValue,
                  body: json["body"], stepPath: json["stepPath"]?.stringValue)
    }
}

/// How one step or job ended.
public enum StepOutcome: Sendable {
    case success(JSONValue)
    /// A failure; `result` keeps partial results (a failed group's `{results, errors, stopped}`).
    case failure(JobError, result: JSONValue?)

    public static func failure(_ error: JobError) -> StepOutcome { .failure(error, result: nil) }

    public var isSuccess: Bool { if case .success = self { return true } else { return false } }
}

/// The final states of protocol §5, plus the live ones.
public enum JobState: String, Sendable, CaseIterable {
    case queued, running, succeeded, failed, cancelled

    public var isFinal: Bool { self == .succeeded || self == .failed || self == .cancelled }
}

/// A finished job as `job.result` reports it.
public struct JobResult: Sendable {
    public var jobId: String
    public var state: JobState
    /// The job's result. A single remote job's is kept unbuilt until read (when
    /// no event needed it): reading builds it, every time, on the reader's
    /// thread; keep the value when you read it more than once.
    public var result: JSONValue? {
        get {
            switch storage {
            case .value(let value): return value
            case .deferred(let deferred): return deferred.build()
            }
        }
        set { storage = .value(newValue) }
    }
    public var error: JobError?
    private var storage: Storage

    private enum Storage: Sendable {
        case value(JSONValue?)
        case deferred(any DeferredResult)
    }

    public init(jobId: String, state: JobState, result: JSONValue?, error: JobError?) {
        self.jobId = jobId
        self.state = state
        storage = .value(result)
        self.error = error
    }

    /// A succeeded job whose result is built when read.
    init(jobId: String, deferred: any DeferredResult) {
        self.jobId = jobId
        state = .succeeded
        storage = .deferred(deferred)
        error = nil
    }

    /// `{"jobId", "state", "result"?, "error"?}`.
    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = ["jobId": .string(jobId), "state": .string(state.rawValue)]
        if let result { o["result"] = result }
        if let error { o["error"] = error.json }
        return .object(o)
    }
}
