/// The executors of the managers sharing one worker (the REST and resource
/// managers on a remote worker), as one: each task goes to the executor of its
/// spec `type`. Loop-confined like every executor (the worker's loop thread).
final class ExecutorSet: JobExecutor {
    /// Each type with its executor. A handful: scanned, not hashed (the type
    /// names are short inline strings, compared in one step; a dictionary
    /// lookup hashed the name for every task).
    private let types: [String]
    private let executors: [any JobExecutor]
    private let all: [any JobExecutor]

    init(_ executors: [(types: Set<String>, executor: any JobExecutor)]) {
        var types: [String] = []
        var byType: [any JobExecutor] = []
        for (names, executor) in executors {
            for type in names {
                if let i = types.firstIndex(of: type) {
                    byType[i] = executor  // a later manager's executor takes the type, as before
                } else {
                    types.append(type)
                    byType.append(executor)
                }
            }
        }
        self.types = types
        self.executors = byType
        all = executors.map(\.executor)
    }

    private func executor(for type: String) -> (any JobExecutor)? {
        for i in types.indices where types[i] == type { return executors[i] }
        return nil
    }

    func start(_ task: WorkTask, handle: TaskHandle) {
        guard let executor = executor(for: task.spec.typeName) else {
            handle.finish(.failure(JobError(.internal, "no executor runs \(task.spec.typeName) jobs on this worker")))
            return
        }
        executor.start(task, handle: handle)
    }

    func cancel(_ task: WorkTask, handle: TaskHandle) {
        executor(for: task.spec.typeName)?.cancel(task, handle: handle)
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
