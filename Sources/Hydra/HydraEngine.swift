import HydraLoop
import Foundation
import HydraCore
import HydraHTTP
import HydraLocal
import HydraREST
import HydraResources
import Synchronization

/// The Hydra engine, embedded: named workers on libuv loops running remote
/// (libcurl) and local jobs and graphs of them, with events. Create it from a
/// ``Configuration`` or a file, register local jobs and dogmas, submit specs,
/// `await` results, stream events. Thread-safe; call ``shutdown()`` when done.
///
/// ```swift
/// let engine = try HydraEngine(configuration: Configuration())
/// let result = try await engine.run(.remote(.get("http://127.0.0.1:8080/v1/hello")))
/// engine.shutdown()
/// ```
public final class HydraEngine: Sendable {
    public let configuration: Configuration
    public let scheduler: Scheduler
    /// The REST client manager: servers, apis, dogmas, dummy responses.
    public let rest: RESTManager
    /// The resource manager, on the remote workers beside ``rest``.
    public let resources: ResourceManager
    /// Named local jobs (built-ins: delay, echo, fail, pick).
    public let localJobs: LocalJobRegistry
    /// Where downloads (`saveAs`) and other state live.
    public let stateDirectory: String
    /// What ``shutdown()`` stops, apart from the engine object: the stop can
    /// then run on a thread of its own, and from `deinit`.
    private let stopper: EngineStopper

    /// Starts the engine's threads. The configuration gets the checks a
    /// configuration file gets (errors name the key), and the state folder is
    /// created if missing; unless another process holds it (a server, another
    /// engine), the engine locks it for its life (`hydra.lock`).
    /// - Parameters:
    ///   - configuration: workers, servers, apis, defaults, dummy responses (config.md).
    ///   - stateDirectory: overrides `state.path`.
    ///   - jobsDirectory: overrides `jobs.path`.
    ///   - shared: where `${shared.KEY}` references read from.
    ///   - journal: hears each finished step of jobs queued with `Scheduler.enqueue` (durable servers).
    ///   - responseCache: where responses of apis with a `cacheTTL` are kept (none: no caching).
    ///   - resourceIndex: where the resource repository's index lives (none: in memory, see `MemoryResourceIndex`).
    ///   - sharedKey: the `HYDRA_SHARED_KEY` passphrase, for `aes-gcm` resources and auth tokens at rest.
    ///   - authTokens: where auth sessions keep their tokens (sealed with `sharedKey`;
    ///     without both they live in memory only).
    ///   - lastSeq: the seq of the last event already issued (events continue after it).
    ///   - retainFinished: how many finished jobs (status and result) stay in memory for
    ///     ``status(of:)`` and ``result(of:)``, oldest forgotten first. Each costs its
    ///     result's size (a remote result with headers: about 2 KB).
    public init(configuration: Configuration = Configuration(), stateDirectory: String? = nil,
                jobsDirectory: String? = nil, shared: (any SharedDataReader)? = nil,
                journal: (any JobJournal)? = nil, responseCache: (any ResponseCache)? = nil,
                resourceIndex: (any ResourceIndexStore)? = nil, sharedKey: String? = nil,
                authTokens: (any AuthTokenStore)? = nil, lastSeq: UInt64 = 0, retainFinished: Int = Scheduler.defaultRetainFinished) throws(ValidationError) {
        HTTPClient.initializeLibrary()
        var configuration = configuration
        try configuration.check()
        self.configuration = configuration
        self.stateDirectory = stateDirectory ?? configuration.state.path
        try HydraEngine.prepareStateFolder(self.stateDirectory, field: stateDirectory == nil ? "state.path" : "stateDirectory")
        rest = RESTManager(configuration: configuration, stateDirectory: self.stateDirectory, cache: responseCache,
                           authTokens: authTokens, sharedKey: sharedKey)
        resources = ResourceManager(rest: rest, index: resourceIndex ?? MemoryResourceIndex(),
                                    stateDirectory: self.stateDirectory, sharedKey: sharedKey)
        // The folder is locked whether or not it existed: an engine that found
        // none and locked nothing had its copies cleared by the next one to start.
        // A server passes its index and holds the lock itself.
        var folderLock: StateFolderLock?
        if resourceIndex == nil, let lock = try? StateFolderLock(folder: self.stateDirectory, settle: .milliseconds(250)) {
            // An index in memory starts empty: every copy an earlier run left in
            // the repository is unknown to it, and would stay on disk uncounted
            // by `maxBytes` for ever. They go now, with any partial download, but
            // only in a folder this engine owns: in one a server (or another
            // engine) holds, they are its copies and its transfers under way.
            // (A persistent index is reconciled by whoever owns it: `hydra
            // serve` at startup, or an embedder through `resources.reconcile()`.)
            folderLock = lock
            _ = try? resources.reconcile()
            RESTManager.removeLeftoverDownloads(in: resources.repositoryPath)
        }
        localJobs = LocalJobRegistry()
        var environment: [String: String] = [:]
        let processEnvironment = ProcessInfo.processInfo.environment
        for name in configuration.allowEnv { environment[name] = processEnvironment[name] }
        scheduler = try Scheduler(
            workers: configuration.workers,
            managers: [rest, resources, LocalJobManager(registry: localJobs)],
            library: FileJobLibrary(folder: jobsDirectory ?? configuration.jobsPath),
            environment: environment, allowEnv: Set(configuration.allowEnv), shared: shared, journal: journal, lastSeq: lastSeq,
            retainFinished: retainFinished, maxQueuedJobs: configuration.maxQueuedJobs,
            maxResultBytes: configuration.maxResultBytes)
        stopper = EngineStopper(scheduler: scheduler, resources: resources, folderLock: folderLock)
        registerEmitJob()
        resources.attach(bus: scheduler.bus)
        // The disk LRU and expiry, every resources.purgeIntervalSec, off the loops.
        resources.startUpkeep()
    }

    /// Runs the checks an engine's start runs on `configuration` (those a
    /// configuration file gets, and the dogmas its apis name among the
    /// built-in ones), starting nothing and touching no file: what `hydra
    /// serve --check-config` reports.
    public static func check(_ configuration: Configuration) throws(ValidationError) {
        var configuration = configuration
        try configuration.check()
        try RESTManager(configuration: configuration, stateDirectory: configuration.state.path).checkConfiguredDogmas()
    }

    /// Starts an engine from a configuration file (errors name the file and key path).
    public convenience init(configurationFile path: String) throws {
        try self.init(configuration: Configuration.load(path: path))
    }

    /// An engine dropped without ``shutdown()`` stops its threads and lets go of
    /// its state folder (its jobs are abandoned, as at ``shutdown()``).
    deinit { stopper.stop() }

    /// Creates the state folder if missing; refuses a path that names
    /// something else (a file), or one that cannot be made, naming `field`.
    private static func prepareStateFolder(_ path: String, field: String) throws(ValidationError) {
        guard !path.isEmpty else { throw ValidationError(path: field, "must not be empty (a folder; \".\" for the current one)") }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw ValidationError(path: field, "\(path.debugDescription) is not a folder") }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw ValidationError(path: field, "cannot create the state folder \(path.debugDescription): \(error.localizedDescription)")
        }
    }

    // MARK: - Registration

    /// Adds a named local job (see ``LocalJob`` for where it runs).
    public func register(localJob name: String, _ job: LocalJob) { localJobs.register(name, job) }

    /// Adds a dogma (response codec) that specs name with `"dogma"`.
    public func register(dogma: any Dogma) { rest.register(dogma: dogma) }

    /// Adds a Swift dummy-response handler: a reply it returns answers the
    /// request without the network and emits `job.skipped` (reason `dummy`).
    public func register(dummy handler: @escaping DummyHandler) { rest.register(dummy: handler) }

    // MARK: - Jobs

    /// Checks and queues a job; returns its id. Errors name the field by path.
    @discardableResult
    public func submit(_ spec: JobSpec, input: JSONValue = .null, priority: Int = 0) throws(ValidationError) -> String {
        try scheduler.submit(spec, input: input, priority: priority)
    }

    /// Decodes, checks and queues a JSON spec; returns its id.
    @discardableResult
    public func submit(json: JSONValue, input: JSONValue = .null, priority: Int = 0) throws(ValidationError) -> String {
        try scheduler.submit(JobSpec(json: json), input: input, priority: priority)
    }

    /// Queues a job and calls `completion` with its result. `completion` runs on
    /// the coordinator thread: keep it quick. For high-rate callers.
    @discardableResult
    public func submit(_ spec: JobSpec, input: JSONValue = .null, priority: Int = 0,
                       completion: @escaping @Sendable (JobResult) -> Void) throws(ValidationError) -> String {
        try scheduler.submit(spec, input: input, priority: priority, completion: completion)
    }

    /// Queues many jobs with one hand-over to the coordinator; `completion` runs
    /// once per job on the coordinator thread. All-or-nothing on validation.
    @discardableResult
    public func submit(batch: [JobSpec], input: JSONValue = .null, priority: Int = 0,
                       completion: @escaping @Sendable (JobResult) -> Void) throws(ValidationError) -> [String] {
        try scheduler.submit(batch: batch.map { ($0, input) }, priority: priority, completion: completion)
    }

    /// Runs a job to its end and returns its result (failures are results, not
    /// throws). Cancelling the calling task cancels the job: the result is then
    /// the job's `cancelled` one.
    public func run(_ spec: JobSpec, input: JSONValue = .null, priority: Int = 0) async throws(ValidationError) -> JobResult {
        let box = ResultBox()
        let id = try scheduler.submit(spec, input: input, priority: priority) { box.set($0) }
        let scheduler = self.scheduler
        return await withTaskCancellationHandler {
            await box.value(jobId: id)
        } onCancel: {
            scheduler.cancel(id) { _ in }
        }
    }

    /// Waits for the final result of a job; nil when the id is unknown. It waits
    /// for the job, which it does not own: cancelling the waiting task leaves
    /// the job be (``cancel(_:)`` cancels it).
    public func result(of jobId: String) async -> JobResult? { await scheduler.result(of: jobId) }

    /// Cancels a job and its running steps.
    @discardableResult
    public func cancel(_ jobId: String) async -> CancelReply { await scheduler.cancel(jobId) }

    public func status(of jobId: String) -> JobStatus? { scheduler.status(of: jobId) }

    // MARK: - Events

    /// The events matching `filter`, from now on, as an async sequence. The
    /// subscription ends when the consumer stops iterating, or with the engine
    /// (one asked for after ``shutdown()`` is already finished). Slow consumers
    /// buffer without limit (use `bufferingPolicy` to cap it).
    public func events(_ filter: EventFilter = EventFilter(),
                       bufferingPolicy: AsyncStream<HydraEvent>.Continuation.BufferingPolicy = .unbounded)
        -> AsyncStream<HydraEvent>
    {
        let (stream, continuation) = AsyncStream<HydraEvent>.makeStream(bufferingPolicy: bufferingPolicy)
        let sink = StreamSink(continuation)
        let bus = scheduler.bus
        let (id, _) = bus.subscribe(filter, sink: sink)
        let streams = stopper.streams
        let open = streams.withLock { s -> Bool in
            guard !s.finished else { return false }
            s.open[id] = continuation
            return true
        }
        guard open else {
            bus.unsubscribe(id)
            continuation.finish()
            return stream
        }
        continuation.onTermination = { _ in
            bus.unsubscribe(id)
            streams.withLock { _ = $0.open.removeValue(forKey: id) }
        }
        return stream
    }

    /// Subscribes a sink directly (it runs on the emitting thread; see ``EventSink``).
    public func subscribe(_ filter: EventFilter = EventFilter(), sink: any EventSink) -> UInt64 {
        scheduler.bus.subscribe(filter, sink: sink).id
    }

    public func unsubscribe(_ id: UInt64) { scheduler.bus.unsubscribe(id) }

    // MARK: - Workers

    public var workers: [Worker] { scheduler.workers }

    /// Counters of every worker.
    public func workerStats() -> [WorkerStats] { scheduler.workers.map { $0.stats() } }

    /// Stops the threads at once; running jobs are abandoned (their transfers
    /// cancelled), later submits are refused (kind `shuttingDown`). Idempotent.
    /// Called from one of the engine's own threads (a completion, an event
    /// sink, a local job running on its worker's loop), it returns at once and
    /// the stop runs on a thread of its own: those are the threads it ends.
    public func shutdown() { stopper.stop() }

    /// Graceful stop: new submissions are refused (kind `shuttingDown`), jobs
    /// already submitted may finish within `gracePeriod`, then the threads stop.
    /// Returns true when every job finished in time.
    @discardableResult
    public func shutdown(gracePeriod: Duration) async -> Bool {
        let drained = await scheduler.drain(timeout: gracePeriod)
        stopper.stop()
        return drained
    }

    /// Cuts a ``shutdown(gracePeriod:)`` under way short: it stops waiting for
    /// running jobs now (they stay unfinished, to resume at the next start of
    /// a durable server). Any thread.
    public func endGracePeriod() { scheduler.endDrain() }
}

/// What an engine's stop ends, held apart from the engine (see ``HydraEngine/shutdown()``).
private final class EngineStopper: Sendable {
    let scheduler: Scheduler
    let resources: ResourceManager
    /// The streams ``HydraEngine/events(_:bufferingPolicy:)`` handed out, by bus
    /// subscription, finished at the stop; none is handed out open after it.
    let streams = Locked<(open: [UInt64: AsyncStream<HydraEvent>.Continuation], finished: Bool)>(([:], false))
    /// The state folder's lock, while the engine owns the folder; released at the stop.
    private let folderLock: Locked<StateFolderLock?>

    init(scheduler: Scheduler, resources: ResourceManager, folderLock: StateFolderLock?) {
        self.scheduler = scheduler
        self.resources = resources
        self.folderLock = Locked(folderLock)
    }

    /// Set by the first stop handed to a thread of its own: later calls from
    /// the engine's threads (every completion of a batch, say) start no other.
    private let handedOff = Atomic<Bool>(false)

    /// Stops everything, on a thread of its own when called on one it joins. Idempotent.
    func stop() {
        if scheduler.ownsCurrentThread || resources.ownsCurrentThread {
            guard !handedOff.exchange(true, ordering: .acquiringAndReleasing) else { return }
            let thread = Thread { [self] in stopNow() }
            thread.name = "hydra-shutdown"
            thread.start()
            return
        }
        stopNow()
    }

    private func stopNow() {
        resources.stopUpkeep()
        scheduler.shutdown()
        // The event streams end with the engine (a `for await` loop over one returns).
        let open = streams.withLock { s -> [AsyncStream<HydraEvent>.Continuation] in
            s.finished = true
            defer { s.open = [:] }
            return Array(s.open.values)
        }
        for continuation in open { continuation.finish() }
        folderLock.withLock { $0 = nil }
    }
}

/// Feeds bus events into an `AsyncStream`.
private final class StreamSink: EventSink {
    let continuation: AsyncStream<HydraEvent>.Continuation
    init(_ continuation: AsyncStream<HydraEvent>.Continuation) { self.continuation = continuation }
    func receive(_ event: HydraEvent) { continuation.yield(event) }
}

/// Hands a result produced on the coordinator thread to one awaiting task.
private final class ResultBox: Sendable {
    private let state = Locked<(result: JobResult?, waiter: CheckedContinuation<JobResult, Never>?)>((nil, nil))

    func set(_ result: JobResult) {
        let waiter = state.withLock { s -> CheckedContinuation<JobResult, Never>? in
            s.result = result
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: result)
    }

    func value(jobId: String) async -> JobResult {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> JobResult? in
                if let result = s.result { return result }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

