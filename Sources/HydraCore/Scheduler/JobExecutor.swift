import HydraLoop

/// Runs leaf jobs on one worker. Loop-confined: every method is called on the
/// worker's loop thread, and the executor reports through the ``TaskHandle``
/// on that thread too (hop back with `loop.execute` after work elsewhere).
public protocol JobExecutor: AnyObject {
    /// Starts `task`; report progress and exactly one ``TaskHandle/finish(_:)``.
    func start(_ task: WorkTask, handle: TaskHandle)
    /// Stops a started task early. The executor still calls `finish` (with any
    /// outcome) once the work has really stopped, which frees the worker's slot.
    func cancel(_ task: WorkTask, handle: TaskHandle)
    /// The worker's limits changed (`worker.configure`); they hold from the next request.
    func reconfigure(_ limits: WorkerLimits)
    /// The worker is stopping: release resources. Unfinished tasks may be dropped.
    func close()
}

extension JobExecutor {
    /// Most executors have no limits of their own: the worker's `maxActive` is enough.
    public func reconfigure(_ limits: WorkerLimits) {}
}
