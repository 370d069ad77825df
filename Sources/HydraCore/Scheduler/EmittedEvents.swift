/// The events a job sent before a restart that its resumed run must not send
/// again: protocol §6 promises each job and step `queued < started < … <
/// exactly one final event`, and a client replaying with `fromSeq` across the
/// restart would otherwise see a step's `job.queued` or `job.succeeded` twice.
///
/// Only the events that happen once per step are kept: `job.retrying` and
/// `job.progress` of a step run again after the restart are new facts.
/// Read from the store at recovery; used on the coordinator thread.
public struct EmittedEvents: Sendable {
    private var keys: Set<String> = []

    /// The names that happen at most once per job or step.
    static let oncePerStep: Set<String> = [
        EventName.queued, EventName.started, EventName.succeeded, EventName.failed,
        EventName.cancelled, EventName.skipped, EventName.groupDone,
    ]

    public init() {}

    public var isEmpty: Bool { keys.isEmpty }

    /// Records that the step at `stepPath` sent `name` (ignored unless it happens once per step).
    public mutating func insert(stepPath: String, name: String) {
        guard EmittedEvents.oncePerStep.contains(name) else { return }
        keys.insert(stepPath + " " + name)
    }

    /// True when the step at `stepPath` already sent `name` before the restart.
    public func contains(stepPath: String, name: String) -> Bool {
        !keys.isEmpty && keys.contains(stepPath + " " + name)
    }
}
