/// What the coordinator tells the state store about a journaled job's life,
/// so a restarted server resumes it where it was: when it started, and the
/// outcome of every leaf step it finished.
///
/// The coordinator calls it directly, on its own thread, at the moment each
/// thing happens; no store infers a job's life from the event stream.
/// (The final result still reaches the store through the submit's completion;
/// it joins this protocol with the encoded-result path.) Implemented by the
/// server over a ``StateStore``; the scheduler only knows this protocol.
/// Each method queues a write and never waits.
public protocol JobJournal: Sendable {
    /// The job started running (a worker started one of its steps) at `time`,
    /// the `startedAt` that `job.status` reports, kept across restarts.
    func jobStarted(jobId: String, at time: Double)
    /// A leaf step finished.
    func stepFinished(jobId: String, stepPath: String, outcome: StoredStep)
}
