import HydraCore
import HydraLoop

/// The manager of `local` jobs: checks names at submit and runs jobs from its
/// registry on the local workers it is bound to.
public final class LocalJobManager: JobManager {
    public let name = "local"
    public let kinds: Set<JobKind> = [.local]
    public let registry: LocalJobRegistry

    public init(registry: LocalJobRegistry) {
        self.registry = registry
    }

    public func validate(_ spec: JobSpec, path: String) throws(ValidationError) {
        guard case .local(let local) = spec.body else { return }
        // A name given by a reference is checked when the step runs.
        guard Template.containsReference(local.name) || registry.job(named: local.name) != nil else {
            throw ValidationError(path: FieldReader.join(path, "name"), "unknown local job '\(local.name)'")
        }
        if local.name == "delay", !Template.containsReference(local.input) {
            guard local.input["ms"]?.intValue.map({ $0 >= 0 }) ?? false else {
                throw ValidationError(path: FieldReader.join(path, "input.ms"), "expected a non-negative integer")
            }
        }
    }

    public func makeExecutor(for worker: WorkerContext) -> any JobExecutor {
        LocalExecutor(loop: worker.loop, registry: registry, threads: worker.configuration.threads,
                      name: worker.name)
    }
}

/// Runs local jobs on one worker. Loop-confined (see ``JobExecutor``).
final class LocalExecutor: JobExecutor {
    private let loop: EventLoop
    private let registry: LocalJobRegistry
    private let pool: BlockingPool
    private var running: [UInt64: Running] = [:]
    /// The registry as of `snapshotVersion` (refreshed when a job is registered).
    private var snapshot: [String: LocalJob] = [:]
    private var snapshotVersion = -1

    private struct Running {
        var flag: CancellationFlag
        var timer: ScheduledTask?
        var task: Task<Void, Never>?
    }

    init(loop: EventLoop, registry: LocalJobRegistry, threads: Int, name: String) {
        self.loop = loop
        self.registry = registry
        pool = BlockingPool(threads: threads, name: "hydra-\(name)-blocking")
    }

    func start(_ task: WorkTask, handle: TaskHandle) {
        if registry.version != snapshotVersion { (snapshot, snapshotVersion) = registry.snapshot }
        guard case .local(let spec) = task.spec.body, let job = snapshot[spec.name] else {
            let name = if case .local(let spec) = task.spec.body { spec.name } else { "" }
            handle.finish(.failure(JobError(.invalid, "name: unknown local job '\(name)'")))
            return
        }
        if case .inline(let body) = job.body {
            // Runs to completion right here: nothing can cancel it midway.
            let call = LocalJobCall(input: spec.input, jobId: task.jobId, stepPath: task.stepPath,
                                    readsSecrets: task.readsSecrets, cancellation: CancellationFlag.never)
            handle.finish(LocalExecutor.run { try body(call) })
            return
        }
        if case .onWorker(let body) = job.body {
            let call = LocalJobCall(input: spec.input, jobId: task.jobId, stepPath: task.stepPath,
                                    readsSecrets: task.readsSecrets, cancellation: CancellationFlag.never)
            body(call, handle)
            precondition(handle.isFinished, "a local job run on the worker must finish its task")
            return
        }
        let flag = CancellationFlag()
        let call = LocalJobCall(input: spec.input, jobId: task.jobId, stepPath: task.stepPath,
                                readsSecrets: task.readsSecrets, cancellation: flag)
        switch job.body {
        case .inline, .onWorker:
            break
        case .delay:
            guard let ms = spec.input["ms"]?.intValue, ms >= 0 else {
                handle.finish(.failure(JobError(.invalid, "delay: input.ms must be a non-negative integer")))
                return
            }
            let token = task.token
            let timer = loop.schedule(afterMilliseconds: UInt64(ms)) { [unowned self] in
                self.running[token] = nil
                handle.finish(.success(spec.input))
            }
            running[token] = Running(flag: flag, timer: timer)
        case .blocking(let body):
            let token = task.token
            running[token] = Running(flag: flag)
            let loop = self.loop
            let me = LoopBound(self, loop: loop)
            let done = LoopBound(handle, loop: loop)
            pool.run {
                let outcome = LocalExecutor.run { try body(call) }
                loop.execute {
                    me.value.running[token] = nil
                    done.value.finish(outcome)
                }
            }
        case .async(let body):
            let token = task.token
            let loop = self.loop
            let me = LoopBound(self, loop: loop)
            let done = LoopBound(handle, loop: loop)
            let swiftTask = Task {
                let outcome: StepOutcome
                do {
                    outcome = .success(try await body(call))
                } catch {
                    outcome = LocalExecutor.failure(error, cancelled: Task.isCancelled)
                }
                loop.execute {
                    me.value.running[token] = nil
                    done.value.finish(outcome)
                }
            }
            running[token] = Running(flag: flag, task: swiftTask)
        }
    }

    func cancel(_ task: WorkTask, handle: TaskHandle) {
        guard let entry = running[task.token] else { return }
        entry.flag.set()
        entry.task?.cancel()
        if let timer = entry.timer {
            timer.cancel()
            running[task.token] = nil
            handle.finish(.failure(JobError(.cancelled, "cancelled")))
        }
        // Blocking work cannot be interrupted: its slot frees when it returns.
    }

    func close() {
        for entry in running.values {
            entry.flag.set()
            entry.timer?.cancel()
            entry.task?.cancel()
        }
        running.removeAll()
        pool.shutdown()
    }

    private static func run(_ body: () throws -> JSONValue) -> StepOutcome {
        do { return .success(try body()) } catch { return failure(error, cancelled: false) }
    }

    private static func failure(_ error: any Error, cancelled: Bool) -> StepOutcome {
        if let jobError = error as? JobError { return .failure(jobError) }
        if cancelled || error is CancellationError { return .failure(JobError(.cancelled, "cancelled")) }
        return .failure(JobError(.internal, String(describing: error)))
    }
}
