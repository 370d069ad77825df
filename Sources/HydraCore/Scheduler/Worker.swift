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
    private let counters: WorkerCounters

    init(configuration: Configuration.Worker) {
        self.configuration = configuration
        counters = WorkerCounters(limits: WorkerLimits(configuration))
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

    /// Binds the managers' executors and the coordinator's mailbox. Before any
    /// task arrives. Several managers on one worker (REST and resources on a
    /// remote worker) share its loop; their executors are made on it, in order.
    func bind(managers: [any JobManager], reports: Mailbox<CoordinatorMessage>) {
        let context = WorkerContext(name: name, kind: kind, loop: loop, configuration: configuration,
                                    services: WorkerServices())
        let runtime = self.runtime
        loop.submitAndWait {
            let executor: any JobExecutor
            if managers.count == 1 {
                executor = managers[0].makeExecutor(for: context)
            } else {
                executor = ExecutorSet(managers.map { ($0.jobTypes, $0.makeExecutor(for: context)) })
            }
            runtime.value.bind(executor: executor, outbox: Outbox(loop: context.loop, target: reports))
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

    /// Changes the worker's limits for the next tasks and requests
    /// (`worker.configure`); nil keeps a limit. Returns the limits now in
    /// force. Errors name the field: a limit below 1, or a connection limit
    /// for a local worker (it has no connections). Thread-safe.
    @discardableResult
    public func configure(maxActive: Int? = nil, maxConnections: Int? = nil,
                          maxHostConnections: Int? = nil) throws(ValidationError) -> WorkerLimits {
        for (field, value) in [("maxActive", maxActive), ("maxConnections", maxConnections),
                               ("maxHostConnections", maxHostConnections)] {
            if let value, value < 1 || value > Configuration.Worker.maxLimit {
                throw ValidationError(path: field, "expected an integer from 1 to 1000000")
            }
        }
        if kind != .remote, maxConnections != nil || maxHostConnections != nil {
            throw ValidationError(path: maxConnections != nil ? "maxConnections" : "maxHostConnections",
                                  "worker '\(name)' is a \(kind.rawValue) worker: it has no connections")
        }
        // Sent under the lock: two callers' changes reach the loop in the order they were made.
        return counters.limits.withLock { limits in
            if let maxActive { limits.maxActive = maxActive }
            if let maxConnections { limits.maxConnections = maxConnections }
            if let maxHostConnections { limits.maxHostConnections = maxHostConnections }
            inbox.send(.configure(limits))
            return limits
        }
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
