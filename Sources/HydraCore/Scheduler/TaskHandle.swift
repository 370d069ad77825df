import HydraLoop
import OrderedCollections

/// The executor's line back to the scheduler for one task. Loop thread only.
/// `finish` may be called once; later calls are ignored.
public final class TaskHandle {
    public let task: WorkTask
    unowned(unsafe) let worker: WorkerRuntime
    /// True once `finish` ran.
    @exclusivity(unchecked) public private(set) var isFinished = false
    /// True when the scheduler asked the task to stop.
    @exclusivity(unchecked) public internal(set) var isCancelled = false
    /// Whether `job.started` went out; it is sent lazily so a task that finishes
    /// inside `start` costs one message instead of two.
    @exclusivity(unchecked) var announced = false
    /// A ``skipped(reason:)`` inside `start`, before anything went out: it
    /// travels with `job.started` (see ``WorkerRuntime/announce(_:)``) or with
    /// the outcome, so a hit answered at once costs one message instead of three.
    @exclusivity(unchecked) var pendingSkip: String?

    init(task: WorkTask, worker: WorkerRuntime) {
        self.task = task
        self.worker = worker
    }

    /// Bytes moved so far; `upload` when they are a request body going out.
    public func progress(bytes: Int64, totalBytes: Int64?, upload: Bool = false) {
        guard !isFinished else { return }
        worker.announce(self)
        worker.report(task, .progress(bytes: bytes, total: totalBytes, upload: upload))
    }

    /// A polled request's round `round` got its response (rest.md §5: every round emits `job.progress {round}`, the last included).
    /// `bytes`: the size of that round's response body (protocol §6 gives
    /// `job.progress` a `bytes` member).
    public func polled(round: Int, bytes: Int) {
        guard !isFinished else { return }
        worker.announce(self)
        worker.report(task, .polled(round: round, bytes: bytes))
    }

    /// A failed attempt will be retried after `delayMs`; `attempt` is the number of the next attempt.
    public func retrying(attempt: Int, delayMs: Int, error: JobError) {
        guard !isFinished else { return }
        worker.announce(self)
        worker.report(task, .retrying(attempt: attempt, delayMs: delayMs, error: error))
    }

    /// The job was answered without doing its work (`cache`, `dummy`,
    /// `resource`); a final event follows. Inside `start`, before anything went
    /// out, it is held (``pendingSkip``) and sent with the next report.
    public func skipped(reason: String) {
        guard !isFinished else { return }
        if !announced && pendingSkip == nil {
            pendingSkip = reason
            return
        }
        worker.announce(self)  // (a second one inside `start`: the held one goes out first)
        worker.report(task, .skipped(reason: reason))
    }

    /// Sends a custom event from the task, in order with its own events:
    /// after its `job.started`, before its final event (see ``CustomEmission``).
    public func emit(_ emission: CustomEmission) {
        guard !isFinished else { return }
        worker.announce(self)
        worker.report(task, .custom(emission))
    }

    /// The task's outcome. Frees the worker's slot.
    public func finish(_ outcome: StepOutcome) {
        guard !isFinished else { return }
        isFinished = true
        worker.taskFinished(self, succeeded: outcome.isSuccess) { ran in .finished(outcome, ran: ran, skipped: pendingSkip) }
    }

    /// The task succeeded; the coordinator builds its result (see ``DeferredResult``). Frees the worker's slot.
    public func succeed(building result: any DeferredResult) {
        guard !isFinished else { return }
        isFinished = true
        worker.taskFinished(self, succeeded: true) { ran in .succeeded(result, ran: ran, skipped: pendingSkip) }
    }
}

/// What a worker tells the coordinator about a task.
public enum WorkerReport: Sendable {
    case started
    case progress(bytes: Int64, total: Int64?, upload: Bool)
    /// A polled request's round got its response (`job.progress {round, bytes}`).
    case polled(round: Int, bytes: Int)
    case retrying(attempt: Int, delayMs: Int, error: JobError)
    case skipped(reason: String)
    /// A custom event the task sends (``TaskHandle/emit(_:)``).
    case custom(CustomEmission)
    /// The task's outcome; `ran`: the task also started in this report (it
    /// completed inside `start`, so one message stands for two); `skipped`:
    /// it was answered without doing its work (``TaskHandle/skipped(reason:)``
    /// inside `start`), `job.skipped` goes out between the two.
    case finished(StepOutcome, ran: Bool, skipped: String?)
    /// Succeeded, with the result to build on the coordinator (see
    /// ``DeferredResult``); `ran` as for `finished`.
    case succeeded(any DeferredResult, ran: Bool, skipped: String?)
}
