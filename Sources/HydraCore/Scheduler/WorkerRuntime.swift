import DequeModule
import HydraLoop
import Synchronization

/// The loop-confined part of a worker.
final class WorkerRuntime {
    private let configuration: Configuration.Worker
    private let loop: EventLoop
    @exclusivity(unchecked) private var executor: (any JobExecutor)?
    @exclusivity(unchecked) private var outbox: Outbox<CoordinatorMessage>?

    @exclusivity(unchecked) private var queue = PriorityQueue()
    @exclusivity(unchecked) private var cancelledWhileQueued: Set<UInt64> = []
    @exclusivity(unchecked) private var active = CounterTable<TaskHandle>(capacity: 256)
    @exclusivity(unchecked) private var paused = false
    @exclusivity(unchecked) private var limits: WorkerLimits
    @exclusivity(unchecked) private var pumping = false
    @exclusivity(unchecked) private var done = 0
    @exclusivity(unchecked) private var failed = 0
    private let counters: WorkerCounters

    init(configuration: Configuration.Worker, loop: EventLoop, counters: WorkerCounters) {
        self.configuration = configuration
        self.loop = loop
        self.counters = counters
        limits = WorkerLimits(configuration)
    }

    func bind(executor: any JobExecutor, outbox: Outbox<CoordinatorMessage>) {
        self.executor = executor
        self.outbox = outbox
    }

    /// Makes the counters visible to ``Worker/stats()``.
    private func publish() {
        counters.publish(queued: max(0, queue.count - cancelledWhileQueued.count),
                         active: active.count, done: done, failed: failed)
    }

    func handle(_ message: WorkerMessage) {
        defer { publish() }
        switch message {
        case .run(let task):
            queue.push(task)
            pump()
        case .cancel(let token):
            if let handle = active[token] {
                handle.isCancelled = true
                executor?.cancel(handle.task, handle: handle)
            } else {
                cancelledWhileQueued.insert(token)
            }
        case .pause:
            paused = true
        case .resume:
            paused = false
            pump()
        case .configure(let new):
            limits = new
            executor?.reconfigure(new)
            pump()
        }
    }

    func report(_ task: WorkTask, _ report: WorkerReport) {
        outbox?.post(.report(task, report))
    }

    /// Sends `job.started` for `handle` unless it already went out, then the
    /// `job.skipped` it holds, if any (see ``TaskHandle/pendingSkip``).
    func announce(_ handle: TaskHandle) {
        guard !handle.announced else { return }
        handle.announced = true
        report(handle.task, .started)
        if let reason = handle.pendingSkip {
            handle.pendingSkip = nil
            report(handle.task, .skipped(reason: reason))
        }
    }

    /// A task ended; `report(ran)` is its last report, `ran` true when it
    /// finished inside `start` (never announced as started).
    func taskFinished(_ handle: TaskHandle, succeeded: Bool, report: (_ ran: Bool) -> WorkerReport) {
        if succeeded { done += 1 } else { failed += 1 }
        if handle.announced {
            active.removeValue(forKey: handle.task.token)
            outbox?.post(.report(handle.task, report(false)))
        } else {
            // Finished inside `start`: never entered `active`.
            handle.announced = true
            outbox?.post(.report(handle.task, report(true)))
        }
        pump()
        // Before the report leaves (the outbox hands it over when this loop
        // iteration ends): whoever hears the job ended sees it counted.
        publish()
    }

    /// Starts queued tasks while slots are free. Not re-entered: a task that
    /// finishes synchronously inside `start` lets this loop continue instead.
    private func pump() {
        guard !pumping, let executor else { return }
        pumping = true
        defer {
            pumping = false
            // A cancel can race with the task's own finish; such tokens match nothing queued.
            if queue.count == 0 && !cancelledWhileQueued.isEmpty { cancelledWhileQueued.removeAll() }
        }
        while !paused && active.count < limits.maxActive, let task = queue.pop() {
            if !cancelledWhileQueued.isEmpty, cancelledWhileQueued.remove(task.token) != nil { continue }
            let handle = TaskHandle(task: task, worker: self)
            executor.start(task, handle: handle)
            if !handle.isFinished {
                announce(handle)
                active.insert(handle, forKey: task.token)
            }
        }
    }

    func close() {
        // Let go of the executor first: the tasks its close ends free their slots, and
        // `pump` must not start queued ones on an executor that is closing.
        let closing = executor
        executor = nil
        closing?.close()
        outbox?.flush()
        publish()
    }
}
