import HydraCore

/// The engine's entry points for a durable service built on it (the server's
/// `HydraService`): check a job before it is stored, reserve room, queue
/// stored jobs, ask without blocking, and the event bus. A service uses these
/// and never reaches into the scheduler behind them.
///
/// Every method is thread-safe; replies run on the coordinator's thread,
/// so keep them quick and hop elsewhere for slow work.
extension HydraEngine {
    /// The event bus (subscribe, emit the service's own events, `lastSeq`).
    public var bus: EventBus { scheduler.bus }

    /// Checks `spec`, loads its named jobs and assigns an id (`jobId` when
    /// resuming a stored job), without queueing it. `namedJobs`: a stored
    /// job's record of the named jobs it loaded (``PreparedJob/namedJobs``),
    /// used instead of the jobs folder.
    public func prepare(_ spec: JobSpec, jobId: String? = nil, namedJobs: JSONValue? = nil) throws(ValidationError) -> PreparedJob {
        try scheduler.prepare(spec, jobId: jobId, library: namedJobs.map { RecordedJobLibrary(record: $0) })
    }

    /// Reserves room for `count` jobs under `limits.maxQueuedJobs`, or refuses them all.
    public func reserve(_ count: Int) throws(ValidationError) { try scheduler.reserve(count) }

    /// Gives back reservations that will not be queued.
    public func release(_ count: Int) { scheduler.release(count) }

    /// Queues reserved jobs, journaled, in one hand-over to the coordinator.
    public func enqueue(_ jobs: [QueuedJob]) { scheduler.enqueue(jobs) }

    /// Statuses of the jobs the engine still knows (nil for the others).
    public func statuses(of jobIds: [String], reply: @escaping @Sendable ([JobStatus?]) -> Void) {
        scheduler.statuses(of: jobIds, reply: reply)
    }

    /// Statuses of the jobs the engine still knows, waiting for the coordinator's answer.
    /// Never call on the coordinator's thread.
    public func statuses(of jobIds: [String]) -> [JobStatus?] { scheduler.statuses(of: jobIds) }

    /// Calls `reply` with the job's result once it is final (nil: unknown, or the engine stopped).
    public func whenFinished(_ jobId: String, reply: @escaping @Sendable (JobResult?) -> Void) {
        scheduler.whenFinished(jobId, reply: reply)
    }

    /// Cancels a job and its running steps; `reply` says whether it was running.
    public func cancel(_ jobId: String, reply: @escaping @Sendable (CancelReply) -> Void) {
        scheduler.cancel(jobId, reply: reply)
    }

    /// The worker called `name`.
    public func worker(named name: String) -> Worker? { scheduler.worker(named: name) }

    /// Jobs submitted and not final yet.
    public var unfinishedJobs: Int { scheduler.unfinishedJobs }

    /// Jobs running now (a worker started one of their steps).
    public var runningJobs: Int { scheduler.runningJobs }
}
