/// Hears the outcome of every finished leaf step of a journaled job, so a
/// restarted server can resume a graph after the steps it already finished.
///
/// Implemented by the service layer over a ``StateStore``; the scheduler only
/// knows this protocol.
public protocol StepJournal: Sendable {
    /// A leaf step finished. Called on the coordinator thread: queue the write, never wait.
    func stepFinished(jobId: String, stepPath: String, outcome: StoredStep)
}
