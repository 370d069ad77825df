/// A job ready to run: checked, named jobs loaded, id assigned.
/// Immutable; a class so the hand-over to the coordinator costs one retain.
public final class Submission: Sendable {
    let jobId: String
    /// The coordinator's integer key for the job (see ``JobIdentifier/key(of:)``).
    let key: UInt64
    /// True when the caller chose the id (it does not encode `key`).
    let foreignID: Bool
    let spec: JobSpec
    /// A leaf none of whose own strings holds a `${…}` reference (found out by
    /// the submit-time check, ``Dispatcher/check(_:path:)``): its worker gets it
    /// as it is. False when not known.
    let plainLeaf: Bool
    let input: JSONValue
    let priority: Int
    let createdAt: Double
    /// Called on the coordinator thread with the final result; must be quick.
    let completion: (@Sendable (JobResult) -> Void)?
    /// Journaled jobs report each finished leaf step to the scheduler's ``JobJournal``.
    let journaled: Bool
    /// Leaf outcomes recorded before a restart, by step path.
    let recoveredSteps: [String: StoredStep]
    /// Events sent before a restart.
    let emittedEvents: EmittedEvents
    /// When the job first started, before a restart.
    let startedAt: Double?
    /// Picked up again after a restart: `job.resumed` goes out.
    let resumed: Bool

    init(jobId: String, key: UInt64, foreignID: Bool = false, spec: JobSpec, plainLeaf: Bool = false, input: JSONValue, priority: Int,
         createdAt: Double, completion: (@Sendable (JobResult) -> Void)?, journaled: Bool = false,
         recoveredSteps: [String: StoredStep] = [:], emittedEvents: EmittedEvents = EmittedEvents(),
         startedAt: Double? = nil, resumed: Bool = false) {
        self.startedAt = startedAt
        self.resumed = resumed
        self.journaled = journaled
        self.recoveredSteps = recoveredSteps
        self.emittedEvents = emittedEvents
        self.jobId = jobId
        self.key = key
        self.foreignID = foreignID
        self.spec = spec
        self.plainLeaf = plainLeaf
        self.input = input
        self.priority = priority
        self.createdAt = createdAt
        self.completion = completion
    }
}
