/// The executors of the managers sharing one worker (the REST and resource
/// managers on a remote worker), as one: each task goes to the executor of its
/// spec `type`. Loop-confined like every executor (the worker's loop thread).
final class ExecutorSet: JobExecutor {
    private let byType: TypeTable<any JobExecutor>
    private let all: [any JobExecutor]

    init(_ executors: [(types: Set<String>, executor: any JobExecutor)]) {
        var byType = TypeTable<any JobExecutor>()
        for (types, executor) in executors {
            for type in types { byType.set(executor, for: type) }
        }
        self.byType = byType
        all = executors.map(\.executor)
    }

    func start(_ task: WorkTask, handle: TaskHandle) {
        guard let executor = byType[task.spec.typeName] else {
            handle.finish(.failure(JobError(.internal, "no executor runs \(task.spec.typeName) jobs on this worker")))
            return
        }
        executor.start(task, handle: handle)
    }

    func cancel(_ task: WorkTask, handle: TaskHandle) {
        byType[task.spec.typeName]?.cancel(task, handle: handle)
    }

    func reconfigure(_ limits: WorkerLimits) {
        for executor in all { executor.reconfigure(limits) }
    }

    /// Closes the later managers' executors first: they may use what an
    /// earlier one owns (the resource manager uses the REST manager's pool).
    func close() {
        for executor in all.reversed() { executor.close() }
    }
}
