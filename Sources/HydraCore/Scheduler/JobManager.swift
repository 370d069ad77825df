import HydraLoop

/// A manager executes one or more kinds of leaf jobs (the Hydra idea: the
/// dispatcher binds each manager to the named workers of its kind at startup).
/// The REST client manager runs `remote` jobs, the local-job registry runs
/// `local` ones; a resource manager plugs in the same way.
public protocol JobManager: AnyObject, Sendable {
    /// The manager's name, for diagnostics.
    var name: String { get }
    /// The leaf kinds it executes.
    var kinds: Set<JobKind> { get }
    /// Checks a leaf spec when it is submitted, before references are resolved
    /// (route names, path variables, registered names). Any thread.
    func validate(_ spec: JobSpec, path: String) throws(ValidationError)
    /// Creates the executor that runs this manager's jobs on `worker`.
    /// Called once per bound worker, on that worker's loop thread.
    func makeExecutor(for worker: WorkerContext) -> any JobExecutor
}

/// Runs leaf jobs on one worker. Loop-confined: every method is called on the
/// worker's loop thread, and the executor reports through the ``TaskHandle``
/// on that thread too (hop back with `loop.execute` after work elsewhere).
public protocol JobExecutor: AnyObject {
    /// Starts `task`; report progress and exactly one ``TaskHandle/finish(_:)``.
    func start(_ task: WorkTask, handle: TaskHandle)
    /// Stops a started task early. The executor still calls `finish` (with any
    /// outcome) once the work has really stopped, which frees the worker's slot.
    func cancel(_ task: WorkTask, handle: TaskHandle)
    /// The worker is stopping: release resources. Unfinished tasks may be dropped.
    func close()
}

/// What an executor knows about the worker it runs on.
public struct WorkerContext: Sendable {
    public let name: String
    public let kind: JobKind
    public let loop: EventLoop
    public let configuration: Configuration.Worker
}

/// One leaf job handed to a worker: its spec with references resolved.
/// Immutable; a class so that passing it between threads and queues costs one retain.
public final class WorkTask: Sendable {
    /// Unique per engine; the coordinator's key for this step.
    public let token: UInt64
    public let spec: JobSpec
    public let jobId: String
    public let stepPath: String
    public let priority: Int
    /// The coordinator's node for this step, handed back with every report.
    let step: StepReference

    init(token: UInt64, spec: JobSpec, jobId: String, stepPath: String, priority: Int, step: StepReference) {
        self.token = token
        self.spec = spec
        self.jobId = jobId
        self.stepPath = stepPath
        self.priority = priority
        self.step = step
    }
}
