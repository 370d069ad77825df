/// A checked job with its id, not queued yet (see ``Scheduler/prepare(_:path:jobId:)``).
public struct PreparedJob: Sendable {
    public let jobId: String
    let key: UInt64
    let foreignID: Bool
    let spec: JobSpec
    /// See ``Submission/plainLeaf``.
    let plainLeaf: Bool
    /// The named jobs it loaded (name -> spec JSON, nil when none): recorded
    /// with a stored job, so that a restart resumes, and `job.status` counts,
    /// the graph that was accepted (``RecordedJobLibrary``).
    public let namedJobs: JSONValue?

    /// How many leaf steps the job has (named jobs counted by their graph).
    public var stepCount: Int { spec.leafCount }

    /// How many of its leaf steps ended, counted as the engine counts them
    /// while it holds the job (`job.status` `steps.done`), from what the
    /// journal recorded: a graph's recorded steps that are leaves (a step of
    /// a stopped group that never started is not done; a failed group's own
    /// record is no leaf), a single-step job's one step once it is `final`.
    public func stepsDone(recordedStepPaths: [String], final: Bool) -> Int {
        if spec.isLeaf(at: "") { return final ? 1 : 0 }
        return recordedStepPaths.count { spec.isLeaf(at: $0[...]) }
    }
}

/// A prepared job with what it runs with, for ``Scheduler/enqueue(_:)``.
public struct QueuedJob: Sendable {
    public var prepared: PreparedJob
    public var input: JSONValue
    public var priority: Int
    /// Seconds since 1970 (kept across restarts).
    public var createdAt: Double
    /// Leaf outcomes recorded before a restart, by step path: reused, not run again.
    public var recoveredSteps: [String: StoredStep]
    /// Events sent before a restart, not sent again (see ``EmittedEvents``).
    public var emittedEvents: EmittedEvents
    /// When the job first started, if it did before a restart (kept, not reset).
    public var startedAt: Double?
    /// True for a job picked up again after a restart: it emits `job.resumed`.
    public var resumed: Bool
    /// Runs on the coordinator thread with the final result; keep it quick.
    public var completion: (@Sendable (JobResult) -> Void)?

    public init(prepared: PreparedJob, input: JSONValue, priority: Int, createdAt: Double,
                recoveredSteps: [String: StoredStep] = [:], emittedEvents: EmittedEvents = EmittedEvents(),
                startedAt: Double? = nil, resumed: Bool = false,
                completion: (@Sendable (JobResult) -> Void)?) {
        self.startedAt = startedAt
        self.resumed = resumed
        self.prepared = prepared
        self.input = input
        self.priority = priority
        self.createdAt = createdAt
        self.recoveredSteps = recoveredSteps
        self.emittedEvents = emittedEvents
        self.completion = completion
    }
}
