import HydraLoop

/// A submitted job: the root node plus bookkeeping for status queries. Coordinator loop only.
final class RootJob {
    let id: String
    let key: UInt64
    let priority: Int
    let createdAt: Double
    @exclusivity(unchecked) var startedAt: Double?
    @exclusivity(unchecked) var finishedAt: Double?
    let totalSteps: Int
    @exclusivity(unchecked) var doneSteps = 0
    @exclusivity(unchecked) var node: GraphNode!
    /// The submitter's completion: runs once, only when the job is final.
    @exclusivity(unchecked) var completion: (@Sendable (JobResult) -> Void)?
    /// Callers of `whenFinished`: the result, or nil if the coordinator stops first.
    @exclusivity(unchecked) var waiters: [@Sendable (JobResult?) -> Void] = []
    /// Leaf outcomes recorded before a restart, by step path: reused, not run again.
    @exclusivity(unchecked) var recoveredSteps: [String: StoredStep] = [:]
    /// Events sent before a restart: not sent again.
    @exclusivity(unchecked) var emittedEvents = EmittedEvents()
    /// True when each finished leaf step goes to the step journal.
    @exclusivity(unchecked) var journaled = false
    /// See ``Submission/plainLeaf``: the root leaf's strings need no resolving.
    @exclusivity(unchecked) var plainLeaf = false
    /// True once counted in ``RunningJobs``.
    @exclusivity(unchecked) var countedRunning = false

    init(id: String, key: UInt64, priority: Int, createdAt: Double, totalSteps: Int) {
        self.id = id
        self.key = key
        self.priority = priority
        self.createdAt = createdAt
        self.totalSteps = totalSteps
    }
}
