import OrderedCollections

/// What `job.status` reports.
public struct JobStatus: Sendable {
    public var jobId: String
    public var state: JobState
    public var createdAt: Double
    public var startedAt: Double?
    public var finishedAt: Double?
    public var stepsDone: Int
    public var stepsTotal: Int

    public init(jobId: String, state: JobState, createdAt: Double, startedAt: Double?, finishedAt: Double?,
                stepsDone: Int, stepsTotal: Int) {
        self.jobId = jobId
        self.state = state
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.stepsDone = stepsDone
        self.stepsTotal = stepsTotal
    }

    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = [
            "jobId": .string(jobId), "state": .string(state.rawValue),
            "createdAt": .string(HydraEvent.format(createdAt)),
        ]
        if let startedAt { o["startedAt"] = .string(HydraEvent.format(startedAt)) }
        if let finishedAt { o["finishedAt"] = .string(HydraEvent.format(finishedAt)) }
        o["steps"] = ["done": .int(stepsDone), "total": .int(stepsTotal)]
        return .object(o)
    }
}
