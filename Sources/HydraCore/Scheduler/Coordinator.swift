import HydraLoop
import Synchronization

/// Runs job graphs: owns every graph's state on one loop thread (so graph
/// state needs no locks), sends ready leaves to workers, takes their reports
/// back, emits events and completes submitted jobs.
///
/// Thread-safe facade; the graph state lives in ``CoordinatorRuntime`` on the
/// coordinator loop. Cross-thread traffic is messages (``CoordinatorMessage``).
public final class Coordinator: Sendable {
    public let loop: EventLoop
    public let bus: EventBus
    let inbox: Mailbox<CoordinatorMessage>
    private let runtime: LoopBound<CoordinatorRuntime>
    /// Submitted jobs running now (a worker started one of their steps). Written on the coordinator loop.
    let running = RunningJobs()

    init(dispatcher: Dispatcher, bus: EventBus, environment: [String: String],
         shared: (any SharedDataReader)?, journal: (any JobJournal)?, retainFinished: Int, maxResultBytes: Int,
         clock: any CoordinatorClock) {
        self.bus = bus
        let loop = EventLoop(name: "hydra-coordinator")
        self.loop = loop
        let running = self.running
        (inbox, runtime) = loop.submitAndWait {
            let runtime = CoordinatorRuntime(loop: loop, dispatcher: dispatcher, bus: bus, environment: environment,
                                             shared: shared, journal: journal, retainFinished: retainFinished,
                                             maxResultBytes: maxResultBytes, clock: clock, running: running)
            let inbox = Mailbox<CoordinatorMessage>(loop: loop) { runtime.handle($0) }
            return (inbox, LoopBound(runtime, loop: loop))
        }
        let runtime = self.runtime
        loop.submitAndWait {
            runtime.value.connectWorkers()
        }
    }

    /// Queues a prepared job; false when the coordinator has stopped (nothing
    /// was queued). Thread-safe.
    @discardableResult
    public func submit(_ submission: Submission) -> Bool { inbox.send(.submit(submission)) }

    /// Cancels a job and its running steps. `reply` gets `.cancelled`, `.alreadyFinal` or `.notFound`.
    func cancel(_ jobId: String, reply: @escaping @Sendable (CancelReply) -> Void) {
        if !inbox.send(.cancel(jobId, reply)) { reply(.notFound) }
    }

    /// Calls `reply` with the job's result once it is final (at once if it already is;
    /// nil for an unknown job, or when the coordinator stops first). Thread-safe.
    func whenFinished(_ jobId: String, reply: @escaping @Sendable (JobResult?) -> Void) {
        if !inbox.send(.whenFinished(jobId, reply)) { reply(nil) }
    }

    /// The job's status, or nil. Never call on the coordinator thread.
    func status(_ jobId: String) -> JobStatus? {
        let runtime = self.runtime
        return loop.submitAndWait(ifStopped: nil) { runtime.value.status(jobId) }
    }

    /// Statuses of several jobs in one hop (nil for jobs it does not know). Never call on the coordinator thread.
    func statuses(_ jobIds: [String]) -> [JobStatus?] {
        let runtime = self.runtime
        return loop.submitAndWait(ifStopped: jobIds.map { _ in nil }) { jobIds.map { runtime.value.status($0) } }
    }

    /// Statuses of several jobs (nil for jobs it does not know), without waiting:
    /// `reply` runs on the coordinator thread (all nil at once when it has stopped). Thread-safe.
    func statuses(_ jobIds: [String], reply: @escaping @Sendable ([JobStatus?]) -> Void) {
        if !inbox.send(.statuses(jobIds, reply)) { reply(jobIds.map { _ in nil }) }
    }

    /// Statuses of known jobs, newest first, optionally only those in `state`.
    func list(state: JobState?, limit: Int, after: String?) -> [JobStatus] {
        let runtime = self.runtime
        return loop.submitAndWait(ifStopped: []) { runtime.value.list(state: state, limit: limit, after: after) }
    }

    /// Stops the loop; waiters on unfinished jobs hear nil. Messages still in
    /// the inbox are handled first (the inbox closes), so a job submitted just
    /// before is known and abandoned like the others, not lost with its caller.
    func shutdown() {
        let runtime = self.runtime
        let inbox = self.inbox
        loop.submitAndWait(ifStopped: ()) {
            inbox.close()
            runtime.value.abandonWaiters()
        }
        loop.shutdown()
    }
}

/// Answers to ``Coordinator/cancel(_:reply:)``.
public enum CancelReply: Sendable { case cancelled, alreadyFinal, notFound }
