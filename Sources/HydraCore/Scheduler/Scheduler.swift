import HydraLoop
import Foundation
import Synchronization

/// The scheduler layer assembled: named workers (one loop thread each), the
/// dispatcher that binds managers to them, the coordinator that runs graphs,
/// and the event bus. Higher layers (the embeddable engine, the server) build
/// on this. Thread-safe.
public final class Scheduler: Sendable {
    public let workers: [Worker]
    public let dispatcher: Dispatcher
    public let coordinator: Coordinator
    public let bus: EventBus
    private let stopped = Locked(false)
    /// Set when ``shutdown()`` begins: submits are refused from then on.
    private let halted = Atomic<Bool>(false)
    /// Set once a graceful stop began: submits are refused.
    private let draining = Atomic<Bool>(false)
    /// Submitted and not yet final (for `limits.maxQueuedJobs`).
    private let unfinished = Atomic<Int>(0)
    /// What a graceful stop waits on (see ``drain(timeout:)``): fired by the
    /// last job to end, by the timeout, or by ``endDrain()``. Read under its
    /// lock by whoever takes the count to zero: the lock orders that read with
    /// the drain's own check of the count, so no wake-up is lost.
    private let drainSignal = Locked<DrainSignal?>(nil)
    /// Set by ``endDrain()``, even before a drain began: a drain then ends at once.
    private let drainEnded = Atomic<Bool>(false)
    private let maxQueuedJobs: Int
    /// Job timestamps and timeout timers.
    let clock: any CoordinatorClock

    /// Finished jobs kept in memory for status queries unless told otherwise:
    /// the last 10,000 (about 20 MB of remote results). An embedder has every
    /// result through its completion; more for later queries is `retainFinished`.
    public static let defaultRetainFinished = 10_000

    /// Starts the worker and coordinator threads.
    /// - Parameters:
    ///   - workers: the named workers to run (at least one).
    ///   - managers: each bound to the workers of the kinds it declares.
    ///   - library: where named jobs come from.
    ///   - environment: variables `${env.NAME}` may read (already limited to `allowEnv`).
    ///   - allowEnv: config `allowEnv`: a reference to another name is refused at submit
    ///     (nil: such a reference fails its step when it runs).
    ///   - lastSeq: the seq of the last event already issued.
    ///   - retainFinished: finished jobs kept in memory for status queries.
    ///   - maxResultBytes: `limits.maxResultBytes` (protocol §4 Size limits).
    ///   - clock: job timestamps and timeout timers (tests inject their own).
    public init(workers configurations: [Configuration.Worker], managers: [any JobManager],
                library: (any JobLibrary)?, environment: [String: String] = [:], allowEnv: Set<String>? = nil,
                shared: (any SharedDataReader)? = nil, journal: (any JobJournal)? = nil, lastSeq: UInt64 = 0,
                retainFinished: Int = Scheduler.defaultRetainFinished,
                maxQueuedJobs: Int = 1_000_000, maxResultBytes: Int = 16_777_216,
                clock: any CoordinatorClock = SystemClock()) throws(ValidationError) {
        self.clock = clock
        self.maxQueuedJobs = maxQueuedJobs
        guard !configurations.isEmpty else { throw ValidationError(path: "workers", "at least one worker is required") }
        let workers = configurations.map(Worker.init(configuration:))
        let dispatcher: Dispatcher
        do {
            dispatcher = try Dispatcher(workers: workers, managers: managers, library: library, allowEnv: allowEnv)
        } catch {
            for worker in workers { worker.shutdown() }
            throw error
        }
        self.workers = workers
        self.dispatcher = dispatcher
        bus = EventBus(lastSeq: lastSeq)
        coordinator = Coordinator(dispatcher: dispatcher, bus: bus, environment: environment, shared: shared,
                                  journal: journal, retainFinished: retainFinished, maxResultBytes: maxResultBytes,
                                  clock: clock)
        for worker in workers {
            worker.bind(managers: dispatcher.managers(for: worker.kind), reports: coordinator.inbox)
        }
    }

    /// Checks `spec` (field paths under `path`), loads named jobs, assigns an id
    /// and queues it. `completion` runs on the coordinator thread; keep it quick.
    @discardableResult
    public func submit(_ spec: JobSpec, input: JSONValue = .null, priority: Int = 0, path: String = "",
                       jobId: String? = nil,
                       completion: (@Sendable (JobResult) -> Void)? = nil) throws(ValidationError) -> String {
        let prepared = try dispatcher.check(spec, path: path)
        try admit(1)
        let (id, key) = jobId.map { ($0, JobIdentifier.nextKey()) } ?? JobIdentifier.next()
        let counted = countedCompletion(completion)
        let queued = coordinator.submit(Submission(jobId: id, key: key, foreignID: jobId != nil, spec: prepared.spec,
                                                   plainLeaf: prepared.plainLeaf, input: input,
                                                   priority: priority, createdAt: clock.now(), completion: counted))
        if !queued { counted(Scheduler.shutDownResult(id)) }
        return id
    }

    /// Checks and queues several jobs with one hand-over to the coordinator
    /// (one lock, one wake-up): the fast way to submit many jobs at once.
    /// Nothing is queued when any spec is invalid; the error's path starts with `[index]`.
    @discardableResult
    public func submit(batch: [(spec: JobSpec, input: JSONValue)], priority: Int = 0,
                       completion: (@Sendable (JobResult) -> Void)? = nil) throws(ValidationError) -> [String] {
        // Elements reached by index, fields read in place: iterating the tuples
        // copied each one through generic value witnesses (~1.3k instructions a job).
        var prepared: [JobSpec] = []
        var plain: [Bool] = []
        prepared.reserveCapacity(batch.count)
        plain.reserveCapacity(batch.count)
        for i in batch.indices {
            let checked = try dispatcher.check(batch[i].spec, path: Scheduler.batchPath(i))
            prepared.append(checked.spec)
            plain.append(checked.plainLeaf)
        }
        try admit(batch.count)
        var submissions: [CoordinatorMessage] = []
        var ids: [String] = []
        submissions.reserveCapacity(batch.count)
        ids.reserveCapacity(batch.count)
        let now = clock.now()
        let counted = countedCompletion(completion)
        for i in batch.indices {
            let (id, key) = JobIdentifier.next()
            ids.append(id)
            submissions.append(.submit(Submission(jobId: id, key: key, spec: prepared[i], plainLeaf: plain[i], input: batch[i].input,
                                                  priority: priority, createdAt: now, completion: counted)))
        }
        if !coordinator.inbox.send(contentsOf: submissions) {
            for id in ids { counted(Scheduler.shutDownResult(id)) }
        }
        return ids
    }

    /// `[i]`, the path of a batch's job `i` in errors: made once for the first
    /// thousand (a string built per job cost a batch submit ~1k instructions a job).
    private static let batchPaths: [String] = (0..<1024).map { "[\($0)]" }

    static func batchPath(_ i: Int) -> String { i < batchPaths.count ? batchPaths[i] : "[\(i)]" }

    // MARK: - Two-phase submit (durable callers)

    /// Checks `spec` and assigns an id (`jobId` when given, e.g. a recovered
    /// job's), without queueing anything: a durable caller records the job
    /// first, then hands it to ``enqueue(_:)``.
    public func prepare(_ spec: JobSpec, path: String = "", jobId: String? = nil,
                        library: (any JobLibrary)? = nil) throws(ValidationError) -> PreparedJob {
        let (prepared, plainLeaf, named) = try dispatcher.check(spec, path: path, library: library)
        if let jobId {
            if let key = JobIdentifier.key(of: jobId) {
                return PreparedJob(jobId: jobId, key: key, foreignID: false, spec: prepared, plainLeaf: plainLeaf, namedJobs: named)
            }
            return PreparedJob(jobId: jobId, key: JobIdentifier.nextKey(), foreignID: true, spec: prepared,
                               plainLeaf: plainLeaf, namedJobs: named)
        }
        let (id, key) = JobIdentifier.next()
        return PreparedJob(jobId: id, key: key, foreignID: false, spec: prepared, plainLeaf: plainLeaf, namedJobs: named)
    }

    /// Reserves room for `count` jobs (`limits.maxQueuedJobs`, shutdown), or
    /// refuses them all. Each reservation is used by ``enqueue(_:)`` or given
    /// back with ``release(_:)``.
    public func reserve(_ count: Int) throws(ValidationError) { try admit(count) }

    /// Gives back reservations that will not be enqueued.
    public func release(_ count: Int) { left(count) }

    /// `count` jobs left the unfinished count; the last one wakes a drain.
    private func left(_ count: Int) {
        if unfinished.subtract(count, ordering: .acquiringAndReleasing).newValue == 0 {
            drainSignal.withLock { $0 }?.fire()
        }
    }

    /// Queues reserved jobs with one hand-over to the coordinator. Jobs are
    /// journaled (each finished leaf step reported to the ``JobJournal``).
    public func enqueue(_ jobs: [QueuedJob]) {
        var messages: [CoordinatorMessage] = []
        messages.reserveCapacity(jobs.count)
        for job in jobs {
            let p = job.prepared
            messages.append(.submit(Submission(
                jobId: p.jobId, key: p.key, foreignID: p.foreignID, spec: p.spec, plainLeaf: p.plainLeaf, input: job.input,
                priority: job.priority, createdAt: job.createdAt, completion: countedCompletion(job.completion),
                journaled: true, recoveredSteps: job.recoveredSteps, emittedEvents: job.emittedEvents,
                startedAt: job.startedAt, resumed: job.resumed)))
        }
        // After a shutdown nothing is queued: like the jobs the stop abandons,
        // these stay unfinished in the journal, to run at the next start.
        coordinator.inbox.send(contentsOf: messages)
    }

    /// What a job the stop abandons gets, and one that reached the coordinator
    /// after it stopped (a submit racing ``shutdown()``).
    static func shutDownResult(_ jobId: String) -> JobResult {
        JobResult(jobId: jobId, state: .cancelled, result: nil, error: JobError(.cancelled, "cancelled: the engine shut down"))
    }

    /// Reserves room for `count` jobs, or refuses them all.
    private func admit(_ count: Int) throws(ValidationError) {
        if halted.load(ordering: .acquiring) {
            throw ValidationError(path: "", "shut down: the engine accepts no work after shutdown()", kind: .shuttingDown)
        }
        if draining.load(ordering: .acquiring) {
            throw ValidationError(path: "", "shutting down: no new work is accepted", kind: .shuttingDown)
        }
        let now = unfinished.add(count, ordering: .relaxed).newValue
        if now > maxQueuedJobs {
            left(count)
            throw ValidationError(path: "", "overloaded: \(maxQueuedJobs) jobs are queued or running (limits.maxQueuedJobs)",
                                  kind: .overloaded)
        }
    }

    /// Wraps a completion so the job leaves the unfinished count first.
    private func countedCompletion(_ completion: (@Sendable (JobResult) -> Void)?) -> @Sendable (JobResult) -> Void {
        return { [self] result in
            left(1)
            completion?(result)
        }
    }

    /// True once a graceful stop began.
    public var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// Jobs submitted and not yet final.
    public var unfinishedJobs: Int { unfinished.load(ordering: .relaxed) }

    /// Submitted jobs running now (the other unfinished ones are queued).
    public var runningJobs: Int { coordinator.running.value }

    /// Stops taking new jobs and waits until every submitted job is final or
    /// `timeout` passes. Returns true when all finished in time.
    /// Woken by the last job to end (not polled).
    /// A second drain waits on the same wake-up as the first.
    public func drain(timeout: Duration) async -> Bool {
        draining.store(true, ordering: .releasing)
        let signal = drainSignal.withLock { current -> DrainSignal in
            if let current { return current }
            let made = DrainSignal()
            current = made
            return made
        }
        if unfinished.load(ordering: .acquiring) == 0 { return true }
        if drainEnded.load(ordering: .acquiring) { return false }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            signal.fire()
        }
        await signal.wait()
        timer.cancel()
        return unfinished.load(ordering: .acquiring) == 0
    }

    /// Ends a ``drain(timeout:)`` now, as if its timeout passed (a second
    /// SIGTERM: the operator will not wait). Unfinished jobs stay unfinished.
    public func endDrain() {
        drainEnded.store(true, ordering: .releasing)
        drainSignal.withLock { $0 }?.fire()
    }

    /// Waits for a job's final result; nil for an unknown job, or when the
    /// scheduler stops before the job finishes.
    public func result(of jobId: String) async -> JobResult? {
        await withCheckedContinuation { continuation in
            coordinator.whenFinished(jobId) { continuation.resume(returning: $0) }
        }
    }

    /// Calls `reply` once the job is final (at once if it already is; nil if unknown).
    public func whenFinished(_ jobId: String, reply: @escaping @Sendable (JobResult?) -> Void) {
        coordinator.whenFinished(jobId, reply: reply)
    }

    /// Cancels a job and its running steps; `reply` runs on the coordinator thread. Thread-safe.
    public func cancel(_ jobId: String, reply: @escaping @Sendable (CancelReply) -> Void) {
        coordinator.cancel(jobId, reply: reply)
    }

    /// Cancels a job and its running steps.
    public func cancel(_ jobId: String) async -> CancelReply {
        await withCheckedContinuation { continuation in
            coordinator.cancel(jobId) { continuation.resume(returning: $0) }
        }
    }

    public func status(of jobId: String) -> JobStatus? { coordinator.status(jobId) }

    /// Statuses of several jobs in one hop to the coordinator (nil where unknown).
    public func statuses(of jobIds: [String]) -> [JobStatus?] { coordinator.statuses(jobIds) }

    /// Statuses of several jobs (nil where unknown), without blocking the caller:
    /// `reply` runs on the coordinator's thread, so it must be short and never wait.
    public func statuses(of jobIds: [String], reply: @escaping @Sendable ([JobStatus?]) -> Void) {
        coordinator.statuses(jobIds, reply: reply)
    }

    public func jobs(state: JobState? = nil, limit: Int = 100, after: String? = nil) -> [JobStatus] {
        coordinator.list(state: state, limit: limit, after: after)
    }

    public func worker(named name: String) -> Worker? { workers.first { $0.name == name } }

    /// True on the coordinator's or a worker's thread: a completion, an event
    /// sink, a job running on its worker's loop. ``shutdown()`` joins those
    /// threads, so it must be called from another.
    public var ownsCurrentThread: Bool {
        coordinator.loop.inEventLoop || workers.contains { $0.loop.inEventLoop }
    }

    /// Stops the coordinator and the workers (running transfers are cancelled).
    /// Idempotent. Not on one of the scheduler's own threads (``ownsCurrentThread``).
    public func shutdown() {
        halted.store(true, ordering: .releasing)
        let first = stopped.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        coordinator.shutdown()
        for worker in workers { worker.shutdown() }
    }
}
