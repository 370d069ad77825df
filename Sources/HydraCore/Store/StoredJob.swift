import Foundation

/// A job as the store keeps it.
public struct StoredJob: Sendable, Equatable {
    public var jobId: String
    /// The spec as submitted (JSON), so a restart runs exactly what was acknowledged.
    public var spec: JSONValue
    public var input: JSONValue
    public var priority: Int
    public var idempotencyKey: String?
    public var state: JobState
    public var createdAt: Double
    public var startedAt: Double?
    public var finishedAt: Double?
    /// The `job.result` object once final.
    public var result: JSONValue?
    /// The named jobs its spec loaded at submit (``PreparedJob/namedJobs``).
    public var namedJobs: JSONValue?

    public init(jobId: String, spec: JSONValue, input: JSONValue, priority: Int, idempotencyKey: String?,
                state: JobState = .queued, createdAt: Double, startedAt: Double? = nil,
                finishedAt: Double? = nil, result: JSONValue? = nil, namedJobs: JSONValue? = nil) {
        self.jobId = jobId
        self.spec = spec
        self.input = input
        self.priority = priority
        self.idempotencyKey = idempotencyKey
        self.state = state
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.result = result
        self.namedJobs = namedJobs
    }
}
