/// What the coordinator tells the state store about a journaled job's life,
/// so a restarted server resumes it where it was and answers for it once the
/// engine has forgotten it: when it started, the outcome of every leaf step it
/// finished, and how it ended.
///
/// The coordinator calls it directly, on its own thread, at the moment each
/// thing happens: no store infers a job's life from the event stream or from
/// a submitter's completion. Implemented by the server over a ``JobStore``;
/// the scheduler only knows this protocol. Each method queues a write and
/// never waits.
public protocol JobJournal: Sendable {
    /// The job started running (a worker started one of its steps) at `time`,
    /// the `startedAt` that `job.status` reports, kept across restarts.
    func jobStarted(jobId: String, at time: Double)

    /// A leaf step (or a group that failed) finished; `step` carries its
    /// result and error already encoded. `finalEventFollows`: the coordinator
    /// emits the step's final event right after this call, and the record is
    /// to be kept with that event, never one without the other (see
    /// ``JobStore/recordStep(jobId:stepPath:step:withFinalEvent:done:)``).
    func stepFinished(jobId: String, stepPath: String, step: EncodedStep, finalEventFollows: Bool)

    /// The job is final. `result` is its `job.result` object
    /// (`{"jobId", "state", "result"?, "error"?}`) already encoded as JSON on
    /// the coordinator, straight from the worker's unbuilt result where there
    /// is one: nobody builds a result tree only to journal it.
    /// `finalEventFollows` as for ``stepFinished(jobId:stepPath:step:finalEventFollows:)``:
    /// a final event stored without the final state ran the job again after a
    /// crash, and its second result contradicted the event clients had.
    func jobFinished(jobId: String, state: JobState, result: [UInt8], at time: Double, finalEventFollows: Bool)
}
