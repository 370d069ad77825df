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
    /// The highest `attempt` of each step's `job.retrying` events.
    private var retried: [String: Int] = [:]
    /// The highest `round` of each polling step's `job.progress` events.
    private var polled: [String: Int] = [:]

    /// The names that happen at most once per job or step.
    static let oncePerStep: Set<String> = [
        EventName.queued, EventName.started, EventName.succeeded, EventName.failed,
        EventName.cancelled, EventName.skipped, EventName.groupDone,
    ]

    public init() {}

    public var isEmpty: Bool { keys.isEmpty && retried.isEmpty && polled.isEmpty }

    /// Records that the step at `stepPath` sent `name` (ignored unless it happens once per step).
    public mutating func insert(stepPath: String, name: String) {
        guard EmittedEvents.oncePerStep.contains(name) else { return }
        keys.insert(stepPath + " " + (EventName.isFinal(name) ? "final" : name))
    }

    /// True when the step at `stepPath` already sent `name` before the restart;
    /// for a final event, any final event: a step that ended before the restart
    /// (a group's end is not journaled, so its resumed run ends it again, maybe
    /// otherwise: cancelled by a cancel stored before the crash) sends no second one.
    public func contains(stepPath: String, name: String) -> Bool {
        !keys.isEmpty && keys.contains(stepPath + " " + (EventName.isFinal(name) ? "final" : name))
    }

    /// Records a `job.retrying` of the step at `stepPath` announcing `attempt`.
    public mutating func insert(stepPath: String, retryingAttempt attempt: Int) {
        retried[stepPath] = max(retried[stepPath] ?? 0, attempt)
    }

    /// Records a polling step's `job.progress` for its round `round` (rest.md §5).
    public mutating func insert(stepPath: String, polledRound round: Int) {
        guard round > 0 else { return }
        polled[stepPath] = max(polled[stepPath] ?? 0, round)
    }

    /// The rounds the polling step at `stepPath` made before the restart: each
    /// `job.progress {round}` comes once its response was judged, so the
    /// resumed run goes on with the next (`maxTimes` counts every round).
    public func roundsMade(stepPath: String) -> Int {
        polled.isEmpty ? 0 : polled[stepPath] ?? 0
    }

    /// How many attempts the step at `stepPath` surely made before the restart:
    /// one fewer than the last it announced, which was waiting or in flight and
    /// runs again (`maxAttempts` counts every attempt, across restarts too).
    public func attemptsMade(stepPath: String) -> Int {
        retried.isEmpty ? 0 : max(0, (retried[stepPath] ?? 1) - 1)
    }
}
