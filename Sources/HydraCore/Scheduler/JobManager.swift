import HydraLoop

/// A manager executes one or more kinds of leaf jobs (the Hydra idea: the
/// dispatcher binds each manager to the named workers of its kind at startup).
/// The REST client manager runs `remote` jobs, the local-job registry runs
/// `local` ones, the resource manager `resource` ones on the remote workers
/// beside the REST one (several managers may share a worker kind, each with
/// its own spec types).
public protocol JobManager: AnyObject, Sendable {
    /// The manager's name, for diagnostics.
    var name: String { get }
    /// The worker kinds it is bound to.
    var kinds: Set<JobKind> { get }
    /// The spec `type`s it runs (default: the names of its kinds, `remote` or `local`).
    var jobTypes: Set<String> { get }
    /// Checks a leaf spec when it is submitted, before references are resolved
    /// (route names, path variables, registered names). Any thread.
    func validate(_ spec: JobSpec, path: String) throws(ValidationError)
    /// Creates the executor that runs this manager's jobs on `worker`.
    /// Called once per bound worker, on that worker's loop thread.
    func makeExecutor(for worker: WorkerContext) -> any JobExecutor
    /// Header names (lowercased) whose values carry credentials this manager
    /// knows of beyond the fixed ones (``CredentialHeaders``): the
    /// configuration's api-key headers. `job.queued` summaries mask them.
    var secretHeaderNames: Set<String> { get }
}

extension JobManager {
    public var jobTypes: Set<String> { Set(kinds.map(\.rawValue)) }
    public var secretHeaderNames: Set<String> { [] }
}
