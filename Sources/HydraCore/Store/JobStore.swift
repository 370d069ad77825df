/// The jobs slice of the state store: job rows (spec, input, state, times,
/// final result), idempotency keys, and the finished steps of graphs.
///
/// Threading, as for every slice (see ``StateStore``): thread-safe; writes
/// are queued to one writer and committed in batches, `done` callbacks run on
/// the writer thread once committed; reads run on the calling thread and see
/// every write whose `done` already ran.
public protocol JobStore: Sendable {
    /// Records new jobs (state `queued`) in one transaction. With an
    /// idempotency key already known, that job is not inserted again and the
    /// outcome names the existing job instead.
    func insert(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome], StoreError>) -> Void)

    /// For jobs a submit could not take (the queue full, a stop under way):
    /// the job each one's idempotency key already names, as ``insert(_:done:)``
    /// would have answered (``InsertOutcome/existing(jobId:sameSpec:)``), or nil
    /// where the key is unknown (or the job has none). Writes nothing; ordered
    /// after every insert queued before it, so a key inserted a moment ago is
    /// found. `done` runs on the writer thread.
    func existing(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome?], StoreError>) -> Void)

    /// Records that a job started (state `running`, `startedAt`). Fire and forget.
    func markStarted(jobId: String, at time: Double)

    /// Records a job's final state and its `job.result` object (`result`, as
    /// JSON text). `done` runs once committed.
    func finish(jobId: String, state: JobState, result: [UInt8], at time: Double,
                done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// Records one finished step of a graph (its `stepPath`, `"1.0"`), so a
    /// restarted server resumes a graph after its finished steps. `done` runs once committed.
    func recordStep(jobId: String, stepPath: String, step: EncodedStep,
                    done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// ``finish(jobId:state:result:at:done:)``, kept with the job's final
    /// event when `withFinalEvent` (the event is appended to the events slice
    /// right after): a store that can commits both in one transaction, so a
    /// crash never keeps one without the other. By default, a plain finish.
    func finish(jobId: String, state: JobState, result: [UInt8], at time: Double, withFinalEvent: Bool,
                done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// ``recordStep(jobId:stepPath:step:done:)``, kept with the step's final
    /// event when `withFinalEvent`, as ``finish(jobId:state:result:at:withFinalEvent:done:)`` is.
    func recordStep(jobId: String, stepPath: String, step: EncodedStep, withFinalEvent: Bool,
                    done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// One job, or nil.
    func job(_ jobId: String) throws(StoreError) -> StoredJob?

    /// The paths of the steps recorded for `jobId` (``recordStep(jobId:stepPath:step:done:)``),
    /// in no given order: what `job.status` counts as done once the engine has forgotten the job.
    func recordedStepPaths(of jobId: String) throws(StoreError) -> [String]

    /// Jobs newest first, optionally in one state; `after` is the cursor
    /// returned with the previous page. Returns the page and the next cursor
    /// (nil on the last page).
    func jobs(state: JobState?, limit: Int, after cursor: String?) throws(StoreError) -> (jobs: [StoredJob], next: String?)

    /// Jobs not yet final (queued or running), oldest first, with the steps
    /// they already finished and the events they already sent (see
    /// ``EmittedEvents``): what a restarted server must finish.
    func unfinishedJobs() throws(StoreError) -> [(job: StoredJob, steps: [String: StoredStep], emitted: EmittedEvents)]
}

extension JobStore {
    public func finish(jobId: String, state: JobState, result: [UInt8], at time: Double, withFinalEvent: Bool,
                       done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        finish(jobId: jobId, state: state, result: result, at: time, done: done)
    }

    public func recordStep(jobId: String, stepPath: String, step: EncodedStep, withFinalEvent: Bool,
                           done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        recordStep(jobId: jobId, stepPath: stepPath, step: step, done: done)
    }
}
