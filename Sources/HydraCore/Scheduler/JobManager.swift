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
