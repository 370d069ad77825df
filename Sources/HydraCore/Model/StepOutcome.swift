/// How one step or job ended.
public enum StepOutcome: Sendable {
    case success(JSONValue)
    /// A failure; `result` keeps partial results (a failed group's `{results, errors, stopped}`).
    case failure(JobError, result: JSONValue?)

    public static func failure(_ error: JobError) -> StepOutcome { .failure(error, result: nil) }

    public var isSuccess: Bool { if case .success = self { return true } else { return false } }
}
