import DequeModule
import HydraLoop
import Synchronization

/// A named worker: a thread with its own libuv loop, a queue of tasks and an
/// executor bound by the dispatcher (remote: HTTP transfers; local: local jobs).
///
/// Thread-safe facade: tasks and commands arrive through the worker's mailbox;
/// all queue and executor state lives on the worker's loop thread.
/// Up to `maxActive` tasks run at once; the rest wait in FIFO order, higher
/// `priority` first (Hydra's push-to-front). A paused worker starts nothing new.
public final class Worker: Sendable {
    public let name: String
    public let kind: JobKind
    public let configuration: Configuration.Worker
    public let loop: EventLoop
    let inbox: Mailbox<WorkerMessage>
    private let runtime: LoopBound<WorkerRuntime>
    /// Published by the worker's loop, read by anyone: ``stats()`` never waits for the loop.
    private let counters = WorkerCounters()

    init(configuration: Configuration.Worker) {
        self.configuration = configuration
        name = configuration.name
        kind = configuration.kind
        let loop = EventLoop(name: "hydra-\(configuration.name)")
        self.loop = loop
        let counters = self.counters
        (inbox, runtime) = loop.submitAndWait {
            let runtime = WorkerRuntime(configuration: configuration, loop: loop, counters: counters)
            let inbox = Mailbox<WorkerMessage>(loop: loop) { runtime.handle($0) }
            return (inbox, LoopBound(runtime, loop: loop))
        }
    }

    /// Binds the executor and the coordinator's mailbox. Before any task arrives.
    func bind(manager: any JobManager, reports: Mailbox<CoordinatorMessage>) {
        let context = WorkerContext(name: name, kind: kind, loop: loop, configuration: configuration)
        let runtime = self.runtime
        loop.submitAndWait {
            runtime.value.bind(executor: manager.makeExecutor(for: context),
                               outbox: Outbox(loop: context.loop, target: reports))
        }
    }

    /// Stops starting queued tasks (running ones go on). Thread-safe; ``stats()``
    /// reports the worker paused from the moment this returns.
    public func pause() {
        counters.setPaused(true)
        inbox.send(.pause)
    }
    /// Starts queued tasks again. Thread-safe.
    public func resume() {
        counters.setPaused(false)
        inbox.send(.resume)
    }

    /// Counters and state, as the worker's loop last published them (after
    /// every command it handled and every task that ended). Any thread; it
    /// never waits for the loop, so a busy worker cannot stall the caller
    /// (the RPC loop answers `hydra.stats` and `worker.list` with it).
    public func stats() -> WorkerStats { counters.snapshot(name: name, kind: kind) }

    /// Closes the executor and stops the thread; ``stats()`` keeps answering with
    /// the final counters. Thread-safe; call once.
    func shutdown() {
        let runtime = self.runtime
        loop.submitAndWait { runtime.value.close() }
        loop.shutdown()
    }
}

/// A worker's counters (`worker.list`).
public struct WorkerStats: Sendable {
    public var name: String
    public var kind: JobKind
    public var paused: Bool
    public var queued: Int
    public var active: Int
    public var done: Int
    public var failed: Int

    public var json: JSONValue {
        ["name": .string(name), "kind": .string(kind.rawValue), "state": .string(paused ? "paused" : "running"),
         "queued": .int(queued), "active": .int(active), "done": .int(done), "failed": .int(failed)]
    }
}

/// A worker's counters as its loop last published them (the loop writes, any
/// thread reads; each value is exact, the set may mix two publications), and
/// whether it was asked to pause (written by ``Worker/pause()`` and ``Worker/resume()``).
final class WorkerCounters: Sendable {
    private let paused = Atomic<Bool>(false)
    private let queued = Atomic<Int>(0)
    private let active = Atomic<Int>(0)
    private let done = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)

    func setPaused(_ paused: Bool) { self.paused.store(paused, ordering: .relaxed) }

    /// Worker loop only.
    func publish(queued: Int, active: Int, done: Int, failed: Int) {
        self.queued.store(queued, ordering: .relaxed)
        self.active.store(active, ordering: .relaxed)
        self.done.store(done, ordering: .relaxed)
        // Releasing: a reader that sees this store sees the ones before it.
        self.failed.store(failed, ordering: .releasing)
    }

    func snapshot(name: String, kind: JobKind) -> WorkerStats {
        let failed = self.failed.load(ordering: .acquiring)
        return WorkerStats(name: name, kind: kind, paused: paused.load(ordering: .relaxed),
                           queued: queued.load(ordering: .relaxed), active: active.load(ordering: .relaxed),
                           done: done.load(ordering: .relaxed), failed: failed)
    }
}

enum WorkerMessage: Sendable {
    case run(WorkTask)
    case cancel(UInt64)
    case pause
    case resume
}

/// The loop-confined part of a worker.
final class WorkerRuntime {
    private let configuration: Configuration.Worker
    private let loop: EventLoop
    @exclusivity(unchecked) private var executor: (any JobExecutor)?
    @exclusivity(unchecked) private var outbox: Outbox<CoordinatorMessage>?

    @exclusivity(unchecked) private var queue = PriorityQueue()
    @exclusivity(unchecked) private var cancelledWhileQueued: Set<UInt64> = []
    @exclusivity(unchecked) private var active: [UInt64: TaskHandle] = [:]
    @exclusivity(unchecked) private var paused = false
    @exclusivity(unchecked) private var pumping = false
    @exclusivity(unchecked) private var done = 0
    @exclusivity(unchecked) private var failed = 0
    private let counters: WorkerCounters

    init(configuration: Configuration.Worker, loop: EventLoop, counters: WorkerCounters) {
        self.configuration = configuration
        self.loop = loop
        self.counters = counters
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
        }
    }

    func report(_ task: WorkTask, _ report: WorkerReport) {
        outbox?.post(.report(task, report))
    }

    /// Sends `job.started` for `handle` unless it already went out.
    func announce(_ handle: TaskHandle) {
        guard !handle.announced else { return }
        handle.announced = true
        report(handle.task, .started)
    }

    /// A task ended; `report(ran)` is its last report, `ran` true when it
    /// finished inside `start` (never announced as started).
    func taskFinished(_ handle: TaskHandle, succeeded: Bool, report: (_ ran: Bool) -> WorkerReport) {
        if succeeded { done += 1 } else { failed += 1 }
        if handle.announced {
            active[handle.task.token] = nil
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
        while !paused && active.count < configuration.maxActive, let task = queue.pop() {
            if !cancelledWhileQueued.isEmpty, cancelledWhileQueued.remove(task.token) != nil { continue }
            let handle = TaskHandle(task: task, worker: self)
            executor.start(task, handle: handle)
            if !handle.isFinished {
                announce(handle)
                active[task.token] = handle
            }
        }
    }

    func close() {
        executor?.close()
        executor = nil
        outbox?.flush()
        publish()
    }
}

/// FIFO per priority, highest priority first. Priority 0 (the common case) is a plain deque.
struct PriorityQueue {
    private var normal = Deque<WorkTask>()
    private var others: [Int: Deque<WorkTask>] = [:]
    private var priorities: [Int] = []  // of `others`, descending
    private(set) var count = 0

    mutating func push(_ task: WorkTask) {
        count += 1
        if task.priority == 0 { normal.append(task); return }
        if others[task.priority] == nil {
            priorities.append(task.priority)
            priorities.sort(by: >)
        }
        others[task.priority, default: []].append(task)
    }

    mutating func pop() -> WorkTask? {
        for (i, priority) in priorities.enumerated() {
            if priority < 0 && !normal.isEmpty { break }
            if let task = others[priority]?.popFirst() {
                count -= 1
                if others[priority]!.isEmpty {
                    others[priority] = nil
                    priorities.remove(at: i)
                }
                return task
            }
        }
        if let task = normal.popFirst() { count -= 1; return task }
        return nil
    }
}
