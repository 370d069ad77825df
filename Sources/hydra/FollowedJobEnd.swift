import Foundation
import HydraCore
import HydraRPC

/// How a stream that follows one job (`hydra events --job`, `submit --follow`)
/// ends when the job's final event is not coming: the job had ended at or
/// before the stream's `fromSeq` (a finished job followed without `--from`,
/// an idempotency key of a job that ended before this submit).
///
/// The subscription asks for `hydra.caughtUp` (a server extension: every
/// replayed event has been sent). At that notice the job's state is asked;
/// when it is final, a final event may still be on its way live (the job
/// ended just then), so the stream waits ``grace`` for it before it ends
/// without one.
struct FollowedJobEnd {
    static let grace = 0.5
    /// The job's final state, known at the notice; nil while it runs.
    private(set) var endedState: String?
    private var deadline: Date?

    /// Handles a notice: true when it was `hydra.caughtUp`. `status` asks the
    /// server for the job's `job.status`.
    mutating func observe(_ note: JSONValue, status: () -> JSONValue) -> Bool {
        guard note["method"] == "hydra.caughtUp" else { return false }
        if let state = status()["state"]?.stringValue, let parsed = JobState(rawValue: state), parsed.isFinal {
            endedState = state
            deadline = Date().addingTimeInterval(Self.grace)
        }
        return true
    }

    /// How long the next read may wait: nil (for ever) until the job is known
    /// to have ended.
    var readTimeout: Duration? {
        deadline.map { .milliseconds(max(0, Int($0.timeIntervalSinceNow * 1000))) }
    }

    /// True once the job is known to have ended and its grace is over.
    var isOver: Bool { deadline.map { Date() >= $0 } ?? false }
}
