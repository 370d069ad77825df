import HydraLoop

/// One leaf job handed to a worker: its spec with references resolved.
/// Immutable; a class so that passing it between threads and queues costs one retain.
public final class WorkTask: Sendable {
    /// Unique per engine; the coordinator's key for this step.
    public let token: UInt64
    public let spec: JobSpec
    public let jobId: String
    public let stepPath: String
    public let priority: Int
    /// Attempts the step made before a restart (its `job.retrying` events said
    /// so): its retry policy counts them, and its next attempt is one more.
    public let attemptsMade: Int
    /// Rounds a polling step made before a restart (its `job.progress` events
    /// said so): `repeat.maxTimes` counts them, and its next round is one more.
    public let roundsMade: Int
    /// The step's references read an encrypted (aes-gcm) shared value: what it
    /// keeps from its input must stay as secret (the `shared.set` local job
    /// stores such a value encrypted). Its result and events are masked anyway.
    public let readsSecrets: Bool
    /// The coordinator's node for this step, handed back with every report.
    let step: StepReference

    init(token: UInt64, spec: JobSpec, jobId: String, stepPath: String, readsSecrets: Bool = false, priority: Int,
         attemptsMade: Int = 0, roundsMade: Int = 0, step: StepReference) {
        self.token = token
        self.spec = spec
        self.jobId = jobId
        self.stepPath = stepPath
        self.readsSecrets = readsSecrets
        self.priority = priority
        self.attemptsMade = attemptsMade
        self.roundsMade = roundsMade
        self.step = step
    }
}
