enum CoordinatorMessage: Sendable {
    case submit(Submission)
    case cancel(String, @Sendable (CancelReply) -> Void)
    case whenFinished(String, @Sendable (JobResult?) -> Void)
    case statuses([String], @Sendable ([JobStatus?]) -> Void)
    case report(WorkTask, WorkerReport)
}
