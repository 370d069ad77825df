import HydraCore

/// A named local job. How it runs decides which thread it may occupy:
/// - ``inline(_:)``: on the worker's loop thread; for quick, non-blocking work.
/// - ``blocking(_:)``: on one of the worker's `threads`, so the loop never stalls.
/// - ``async(_:)``: as a Swift task; cancellation reaches it as task cancellation.
public struct LocalJob: Sendable {
    enum Body: Sendable {
        case inline(@Sendable (LocalJobCall) throws -> JSONValue)
        case blocking(@Sendable (LocalJobCall) throws -> JSONValue)
        case async(@Sendable (LocalJobCall) async throws -> JSONValue)
        /// Built-in `delay`: a timer on the worker's loop.
        case delay
        /// On the worker's loop with the task's handle, which the body must
        /// finish: for the engine's own jobs that report more than a result.
        case onWorker(@Sendable (LocalJobCall, TaskHandle) -> Void)
    }
    let body: Body

    /// Runs on the worker's loop thread: it must return quickly and never block.
    public static func inline(_ body: @escaping @Sendable (LocalJobCall) throws -> JSONValue) -> LocalJob {
        LocalJob(body: .inline(body))
    }

    /// Runs on the worker's thread pool (size: the worker's `threads`).
    public static func blocking(_ body: @escaping @Sendable (LocalJobCall) throws -> JSONValue) -> LocalJob {
        LocalJob(body: .blocking(body))
    }

    /// Runs as a Swift task.
    public static func async(_ body: @escaping @Sendable (LocalJobCall) async throws -> JSONValue) -> LocalJob {
        LocalJob(body: .async(body))
    }

    static let delay = LocalJob(body: .delay)

    /// Runs on the worker's loop thread with the task's handle (see
    /// ``TaskHandle``), and must finish it before returning. Within the
    /// package only: embedders' jobs return results.
    package static func onWorker(_ body: @escaping @Sendable (LocalJobCall, TaskHandle) -> Void) -> LocalJob {
        LocalJob(body: .onWorker(body))
    }
}

/// What a local job receives.
public struct LocalJobCall: Sendable {
    /// The step's `input`, references resolved.
    public let input: JSONValue
    /// The submitted job's id and this step's path in it.
    public let jobId: String
    public let stepPath: String
    /// The step's references read an encrypted (aes-gcm) shared value (see
    /// ``WorkTask/readsSecrets``): a job that stores its input keeps it encrypted.
    public let readsSecrets: Bool
    let cancellation: CancellationFlag

    /// True once the job was cancelled; blocking jobs may poll it to stop early.
    public var isCancelled: Bool { cancellation.isSet }
}

/// A local job's way to fail with a chosen kind and message (any other error is kind `internal`).
public typealias LocalJobError = JobError
