import HydraLoop
import Foundation
import Hydra
import HydraCore
import OrderedCollections
import Synchronization

/// The durable engine behind `hydra serve`: a ``HydraEngine`` whose jobs,
/// steps, events and shared data live in a ``StateStore``, so nothing
/// acknowledged is lost across a crash.
///
/// Thread-safe. Methods that wait on the store or on a job answer through a
/// `reply` closure, called once on an arbitrary thread (the store writer or
/// the coordinator); quick queries return directly.
public final class HydraService: Sendable {
    public let engine: HydraEngine
    public let store: any StateStore
    /// Where store reads run, off every loop.
    public let reads: StoreReads
    public let configuration: Configuration
    private let journal: StoreJobJournal
    private let started = Date()
    private let counters = CounterBox()

    /// A class around the counters so closures can capture them.
    private final class CounterBox: Sendable {
        let value = Locked(Counters())
    }

    private struct Counters {
        var submitted = 0
        var recovered = 0
    }

    /// Finished jobs the engine keeps in memory by default: the store answers for older
    /// ones. (100,000 was some 200 MB of results, and a page fault for most of the first
    /// 100,000 jobs.)
    public static let finishedInMemory = 10_000

    /// Opens the engine over `store`. Event numbering continues after the
    /// store's last event (plus `seqReserve` after an unclean stop, so a seq a
    /// client saw before a crash is never issued again).
    /// `retainFinished`: finished jobs the engine keeps in memory (see ``finishedInMemory``).
    /// `sharedKey`: the `HYDRA_SHARED_KEY` passphrase (for `aes-gcm` resources).
    public init(configuration: Configuration, store: any StateStore, stateDirectory: String? = nil,
                jobsDirectory: String? = nil, seqReserve: UInt64 = 0,
                retainFinished: Int = HydraService.finishedInMemory, sharedKey: String? = nil) throws {
        self.configuration = configuration
        self.store = store
        reads = StoreReads()
        let journal = StoreJobJournal(store: store)
        self.journal = journal
        let shared = StoreSharedData(store: store)
        let lastSeq = try store.lastSeq()
        let cache = StoreResponseCache(store: store, events: EventRelay())
        engine = try HydraEngine(configuration: configuration, stateDirectory: stateDirectory,
                                 jobsDirectory: jobsDirectory, shared: shared, journal: journal,
                                 responseCache: cache, resourceIndex: store, sharedKey: sharedKey, authTokens: store,
                                 lastSeq: lastSeq + seqReserve,
                                 retainFinished: retainFinished)
        cache.events.bus.withLock { $0 = engine.bus }
        _ = engine.subscribe(sink: StoreEventLog(store: store))
        registerSharedJobs()
    }

    // MARK: - Jobs

    /// What `job.submit` carries.
    public struct SubmitRequest: Sendable {
        public var job: JSONValue
        public var input: JSONValue
        public var idempotencyKey: String?
        public var priority: Int

        public init(job: JSONValue, input: JSONValue = .null, idempotencyKey: String? = nil, priority: Int = 0) {
            self.job = job
            self.input = input
            self.idempotencyKey = idempotencyKey
            self.priority = priority
        }
    }

    /// Checks the spec (errors name `job.…` paths), records the job durably,
    /// queues it, then replies with its id. A repeated idempotency key with the
    /// same spec replies with the first job's id; with another spec, `conflict`.
    public func submit(_ request: SubmitRequest, reply: @escaping @Sendable (Result<String, ServiceError>) -> Void) {
        submit([request]) { results in reply(results[0]) }
    }

    /// Submits several jobs as ``submit(_:reply:)`` does, with one store write, one
    /// hand-over to the coordinator and one reply (the results in request order).
    /// Each request succeeds or fails on its own, except that a failed write of
    /// the store fails every job that was valid. The JSON-RPC server uses it for
    /// the `job.submit` calls of one batch. `reply` runs on the store's writer thread
    /// after the commit, or after the lookup of refused repeats (see below); on
    /// the caller's thread when no request was valid and none is looked up.
    public func submit(_ requests: [SubmitRequest],
                       reply: @escaping @Sendable ([Result<String, ServiceError>]) -> Void) {
        var results = [Result<String, ServiceError>](repeating: .failure(ServiceError(.internalError, "not submitted")),
                                                     count: requests.count)
        var valid: [(index: Int, prepared: PreparedJob)] = []
        var stored: [StoredJob] = []
        // Refused for now (the queue full, a stop under way) but with an
        // idempotency key: a repeat of a job already taken gets that job's id
        // (protocol §7), so the store is asked, once this call's own inserts
        // are in (a repeat may come in the same call as its first submit),
        // before the refusal is answered.
        var refused: [(index: Int, error: ServiceError)] = []
        var asked: [StoredJob] = []
        valid.reserveCapacity(requests.count)
        stored.reserveCapacity(requests.count)
        let now = Date().timeIntervalSince1970
        for (i, request) in requests.enumerated() {
            do throws(ValidationError) {
                let prepared = try engine.prepare(try JobSpec(json: request.job))
                let job = StoredJob(jobId: prepared.jobId, spec: request.job, input: request.input,
                                    priority: request.priority, idempotencyKey: request.idempotencyKey, createdAt: now,
                                    namedJobs: prepared.namedJobs)
                do throws(ValidationError) {
                    try engine.reserve(1)
                } catch where request.idempotencyKey != nil {
                    refused.append((i, ServiceError(error)))
                    asked.append(job)
                    continue
                }
                valid.append((i, prepared))
                stored.append(job)
            } catch {
                results[i] = .failure(ServiceError(error.kind == .invalid || error.kind == .notFound ? error.prefixed(with: "job") : error))
            }
        }
        record(valid, stored, of: requests, at: now, results: results) { [self, refused, asked] results in
            guard !asked.isEmpty else {
                reply(results)
                return
            }
            store.existing(asked) { outcome in
                var results = results
                for (i, job) in refused.enumerated() {
                    let found = (try? outcome.get()).flatMap { $0.indices.contains(i) ? $0[i] : nil }
                    results[job.index] = switch found {
                    case .existing(let jobId, true): .success(jobId)
                    case .existing(let jobId, false): .failure(Self.conflict(requests[job.index], jobId))
                    case .inserted, nil: .failure(job.error)
                    }
                }
                reply(results)
            }
        }
    }

    /// The refusal of a repeated idempotency key with another spec.
    private static func conflict(_ request: SubmitRequest, _ jobId: String) -> ServiceError {
        ServiceError(.conflict,
                     "idempotencyKey \"\(ServiceError.clip(request.idempotencyKey ?? ""))\" was used by job \(jobId) with a different spec")
    }

    /// Records the jobs `valid` (reserved, `stored` their rows) in one store
    /// write, queues the new ones, and hands on `results` completed (on the
    /// writer thread once committed; at once when there is nothing to record).
    private func record(_ valid: [(index: Int, prepared: PreparedJob)], _ stored: [StoredJob], of requests: [SubmitRequest],
                        at now: Double, results: [Result<String, ServiceError>],
                        reply: @escaping @Sendable ([Result<String, ServiceError>]) -> Void) {
        guard !valid.isEmpty else {
            reply(results)
            return
        }
        let engine = self.engine
        store.insert(stored) { [self, results] outcome in
            var results = results
            switch outcome {
            case .failure(let error):
                engine.release(valid.count)
                for job in valid { results[job.index] = .failure(ServiceError(error)) }
            case .success(let outcomes):
                var queued: [QueuedJob] = []
                queued.reserveCapacity(valid.count)
                for (job, outcome) in zip(valid, outcomes) {
                    let request = requests[job.index]
                    switch outcome {
                    case .existing(let jobId, let sameSpec):
                        engine.release(1)
                        results[job.index] = sameSpec ? .success(jobId) : .failure(Self.conflict(request, jobId))
                    case .inserted:
                        queued.append(QueuedJob(prepared: job.prepared, input: request.input, priority: request.priority,
                                                createdAt: now, completion: nil))
                        results[job.index] = .success(job.prepared.jobId)
                    }
                }
                counters.value.withLock { $0.submitted += queued.count }
                engine.enqueue(queued)
            }
            reply(results)
        }
    }

    /// Queues every job the store holds unfinished (after a restart): graphs
    /// resume after their finished steps; steps that were in flight run again.
    /// Returns how many jobs were recovered; a job whose spec no longer checks
    /// (a server it names taken out of the configuration meanwhile) is finished
    /// as failed, kind `invalid`. Named jobs come from the job's record, not the folder.
    @discardableResult
    public func recover() throws -> Int {
        // Downloads in flight at the crash left temporary files; their jobs run again.
        let leftovers = RESTManager.removeLeftoverDownloads(in: engine.stateDirectory)
        if leftovers > 0 {
            FileHandle.standardError.write(Data(
                "hydra: removed \(leftovers) partial download(s) left by an interrupted run (saveAs files and resources)\n".utf8))
        }
        // The resource repository and its index agree again (resources.md §4); the engine's purge timer keeps them within bounds.
        // A line each start, how many there were included (none, most of the time).
        let (files, entries) = try engine.resources.reconcile()
        FileHandle.standardError.write(Data(
            "hydra: resources: removed \(files) file(s) without an index entry and \(entries) entry(ies) without a file\n".utf8))
        let unfinished = try store.unfinishedJobs()
        var queued: [QueuedJob] = []
        for (job, steps, emitted) in unfinished {
            do {
                let spec = try JobSpec(json: job.spec)
                // The graph accepted at submit: named jobs as they were then, not as the folder holds them now.
                let prepared = try engine.prepare(spec, jobId: job.jobId, namedJobs: job.namedJobs)
                queued.append(QueuedJob(prepared: prepared, input: job.input, priority: job.priority,
                                        createdAt: job.createdAt, recoveredSteps: steps, emittedEvents: emitted,
                                        startedAt: job.startedAt, resumed: true, completion: nil))
            } catch {
                let failure = JobError(.invalid, "cannot resume after a restart: \(error)", stepPath: "")
                let result = JobResult(jobId: job.jobId, state: .failed, result: nil, error: failure)
                // Its history ends as every job's does, with one final event (kept with the finish).
                let ended = emitted.contains(stepPath: "", name: EventName.failed)  // any final event counts
                journal.jobFinished(jobId: job.jobId, state: .failed, result: result.encodedJSON(),
                                    at: Date().timeIntervalSince1970, finalEventFollows: !ended)
                if !ended {
                    engine.bus.emit(EventName.failed, jobId: job.jobId, rootJobId: job.jobId, stepPath: "") { ["error": failure.json] }
                }
            }
        }
        try engine.reserve(queued.count)
        engine.enqueue(queued)
        counters.value.withLock { $0.recovered += queued.count }
        return queued.count
    }

    /// `job.status`: live from the coordinator, else from the store.
    ///
    /// Never blocks the caller: the coordinator answers by message, and the
    /// store is read on the store-read thread (``StoreReads``). `reply` runs on
    /// the coordinator's thread or on that one.
    public func status(of jobId: String, reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        liveOrStored(jobId, reply: reply,
                     live: { [self] live, reply in
                         if live.state.isFinal { whenStored(.success(live.json), reply) } else { reply(.success(live.json)) }
                     },
                     stored: { [self] stored, reply in reply(.success(statusJSON(stored))) })
    }

    /// `job.result` as it stands now: the final result once the job is final,
    /// else `{jobId, state}`. Never blocks the caller, as `status(of:)`.
    ///
    /// It does not wait: a caller that waits for the final state (`waitMs`)
    /// keeps its own table of waiters with its own timers (the RPC server's
    /// ``ResultWaiters``), so a wait that times out leaves nothing behind.
    public func result(of jobId: String, reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        liveOrStored(jobId, reply: reply,
                     live: { [self] live, reply in answerResult(of: jobId, state: live.state, reply: reply) },
                     stored: { [self] stored, reply in
                         if stored.state.isFinal, let result = stored.result {
                             reply(.success(result))
                         } else {
                             answerResult(of: jobId, state: stored.state, reply: reply)
                         }
                     })
    }

    /// The one path of `job.status` and `job.result`: the engine's view of a
    /// job it still knows (`live`, on the coordinator's thread), else the
    /// store's (`stored`, on the store-read thread). A job the engine forgot
    /// but the store still has unfinished had its finish queued, not yet
    /// committed: the store is read again once every queued write is.
    private func liveOrStored(
        _ jobId: String, caughtUp: Bool = false,
        reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void,
        live: @escaping @Sendable (JobStatus, @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) -> Void,
        stored: @escaping @Sendable (StoredJob, @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) -> Void
    ) {
        engine.statuses(of: [jobId]) { [self] statuses in
            if let status = statuses[0] {
                live(status, reply)
                return
            }
            reads.run { [self] in
                let job: StoredJob?
                do throws(ServiceError) { job = try storeJob(jobId) } catch { reply(.failure(error)); return }
                guard let job else { reply(.failure(ServiceError.noJob(jobId))); return }
                if !job.state.isFinal && !caughtUp {
                    store.flush()
                    liveOrStored(jobId, caughtUp: true, reply: reply, live: live, stored: stored)
                    return
                }
                stored(job, reply)
            }
        }
    }

    /// Runs `body` off the caller's thread once the store committed every write queued
    /// before the call (for reads that must see a finish the engine already forgot).
    private func afterQueuedWrites(_ body: @escaping @Sendable () -> Void) {
        reads.run { [store] in
            store.flush()
            body()
        }
    }

    /// Answers `answer` once every write queued now is committed: a final
    /// state or result the engine holds in memory reaches a client only once
    /// its finish is in the store, so no `kill -9` after the answer can undo it
    /// (the job ran again after a restart, and ended otherwise). The finish is
    /// queued before the job's completion runs, so it is among those writes.
    /// `reply` runs on the writer thread.
    public func whenStored(_ answer: Result<JSONValue, ServiceError>,
                           _ reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        store.afterQueuedWrites { reply(answer) }
    }

    /// Answers `job.result` for a job the engine knows, in `state` now: its
    /// result when final, else `{jobId, state}`.
    private func answerResult(of jobId: String, state: JobState,
                              reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let current: JSONValue = ["jobId": .string(jobId), "state": .string(state.rawValue)]
        if state.isFinal {
            // Final in memory, its store write maybe still queued: answered once it is committed.
            engine.whenFinished(jobId) { [self] result in whenStored(.success(result?.json ?? current), reply) }
        } else {
            reply(.success(current))
        }
    }

    /// `job.cancel`.
    public func cancel(_ jobId: String, reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let store = self.store
        engine.cancel(jobId) { [self] answer in
            switch answer {
            case .cancelled:
                // Answered once the cancelled finish is committed: a `kill -9` right
                // after the answer would otherwise run the job again at the next start.
                engine.whenFinished(jobId) { [self] _ in whenStored(.success(["cancelled": true]), reply) }
            case .alreadyFinal:
                reply(.failure(ServiceError(.conflict, "job \(jobId) is already final")))
            case .notFound:
                // Forgotten by the engine: final in the store once its queued finish is committed.
                afterQueuedWrites {
                    // A store that cannot answer (closed while the server stops: -32005) is
                    // said as such: "no job" would tell the client an acknowledged job is gone.
                    do throws(StoreError) {
                        if let job = try store.job(jobId) {
                            reply(.failure(ServiceError(.conflict, "job \(jobId) is already \(job.state.rawValue)")))
                        } else {
                            reply(.failure(ServiceError.noJob(jobId)))
                        }
                    } catch {
                        reply(.failure(ServiceError(error)))
                    }
                }
            }
        }
    }

    /// `job.list`: newest first, with a cursor for the next page.
    ///
    /// Answered off the caller's thread once the store has committed every write queued
    /// before the call, so the list agrees with whatever the client saw before asking
    /// (a job `job.result` reported succeeded is listed under `succeeded`).
    public func list(state: JobState?, limit: Int, after: String?,
                     reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        afterQueuedWrites { [self] in
            reply(Result { () throws(ServiceError) in try listPage(state: state, limit: limit, after: after) })
        }
    }

    private func listPage(state: JobState?, limit: Int, after: String?) throws(ServiceError) -> JSONValue {
        let page: (jobs: [StoredJob], next: String?)
        do {
            page = try store.jobs(state: state, limit: limit, after: after)
        } catch where error.invalidArgument != nil {
            let field = error.invalidArgument ?? ""
            // The description names the field first (`after: …`); the reason is what follows.
            let reason = error.description.hasPrefix(field + ": ") ? String(error.description.dropFirst(field.count + 2)) : error.description
            throw ServiceError.invalidParams(field: field, reason)
        } catch {
            throw ServiceError(error)
        }
        let live = engine.statuses(of: page.jobs.map(\.jobId))
        var jobs: [JSONValue] = []
        for (stored, status) in zip(page.jobs, live) {
            jobs.append(status?.json ?? statusJSON(stored))
        }
        var out: OrderedDictionary<String, JSONValue> = ["jobs": .array(jobs)]
        if let next = page.next { out["next"] = .string(next) }
        return .object(out)
    }

    private func storeJob(_ jobId: String) throws(ServiceError) -> StoredJob? {
        do { return try store.job(jobId) } catch { throw ServiceError(error) }
    }

    /// The status of a job only the store knows, its steps counted as the
    /// engine counted them (a finished job's answer does not change when the
    /// engine forgets it: `done` was `total` here, whatever had run).
    private func statusJSON(_ job: StoredJob) -> JSONValue {
        let prepared = (try? JobSpec(json: job.spec)).flatMap { try? engine.prepare($0, namedJobs: job.namedJobs) }
        let total = prepared?.stepCount ?? 0
        var done = 0
        if let prepared, let paths = try? store.recordedStepPaths(of: job.jobId) {
            done = prepared.stepsDone(recordedStepPaths: paths, final: job.state.isFinal)
        }
        return JobStatus(jobId: job.jobId, state: job.state, createdAt: job.createdAt, startedAt: job.startedAt,
                         finishedAt: job.finishedAt, stepsDone: done, stepsTotal: total).json
    }

    // MARK: - Shared data

    /// `shared.get`. Read (and deciphered) on the store-read thread, where `reply` runs:
    /// never on the caller's.
    public func sharedValue(_ key: String, reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        reads.run { [store] in
            do throws(StoreError) {
                guard let value = try store.sharedValue(key) else {
                    reply(.failure(ServiceError.notFound(field: "key", "no shared key '\(ServiceError.clip(key))'")))
                    return
                }
                reply(.success(value))
            } catch {
                reply(.failure(HydraService.sharedError(error)))
            }
        }
    }

    /// `shared.set`: stores durably, then emits `shared.updated` (without the
    /// value when it is encrypted).
    ///
    /// A named cipher replaces the value and its cipher, whatever the key had.
    /// Without one, the new value is stored the way the old one was (an
    /// aes-gcm key stays encrypted, so a secret is never written in clear by
    /// a call that forgot the cipher); a new key is stored in clear. aes-gcm
    /// without `HYDRA_SHARED_KEY` is refused first, naming it: nothing is
    /// stored and nothing is emitted.
    public func setShared(_ key: String, value: JSONValue, cipher requested: SharedCipher?,
                          reply: @escaping @Sendable (Result<Void, ServiceError>) -> Void) {
        // A key is a name (it is read back as `${shared.KEY}` and shown in events): no control characters.
        if key.isEmpty || key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            reply(.failure(.invalidParams(field: "key", key.isEmpty ? "must not be empty" : "must not contain control characters")))
            return
        }
        let cipher = requested ?? store.sharedCipher(key) ?? SharedCipher.none
        do throws(StoreError) {
            try store.checkCipher(cipher)
        } catch {
            reply(.failure(Self.sharedError(error)))
            return
        }
        let bus = engine.bus
        store.setShared(key, value: value, cipher: cipher) { result in
            switch result {
            case .success:
                bus.emit(EventName.sharedUpdated, jobId: "", rootJobId: "", stepPath: "") {
                    cipher == .aesGCM ? ["key": .string(key)] : ["key": .string(key), "value": value]
                }
                reply(.success(()))
            case .failure(let error):
                reply(.failure(Self.sharedError(error)))
            }
        }
    }

    /// A store failure of `shared.set` or `shared.get` as the caller sees it:
    /// aes-gcm without `HYDRA_SHARED_KEY` is `-32602` naming it (config.md),
    /// anything else as usual.
    private static func sharedError(_ error: StoreError) -> ServiceError {
        guard let field = error.invalidArgument else { return ServiceError(error) }
        let prefix = field + ": "
        let reason = error.description.hasPrefix(prefix) ? String(error.description.dropFirst(prefix.count)) : error.description
        return ServiceError(.invalidParams, prefix + reason, data: ["field": .string(field), "reason": .string(reason)])
    }

    /// `shared.remove`: replies whether the key existed; emits `shared.removed` if it
    /// did, with `value` null (the key has none now), left out for an encrypted key (protocol §6).
    public func removeShared(_ key: String, reply: @escaping @Sendable (Result<Bool, ServiceError>) -> Void) {
        let bus = engine.bus
        let encrypted = store.sharedCipher(key) == .aesGCM
        store.removeShared(key) { result in
            switch result {
            case .success(let removed):
                if removed {
                    bus.emit(EventName.sharedRemoved, jobId: "", rootJobId: "", stepPath: "") {
                        encrypted ? ["key": .string(key)] : ["key": .string(key), "value": .null]
                    }
                }
                reply(.success(removed))
            case .failure(let error):
                reply(.failure(ServiceError(error)))
            }
        }
    }

    /// The `shared.set {key, value, cipher?}` and `shared.get {key}` local jobs.
    private func registerSharedJobs() {
        engine.register(localJob: "shared.set", .async { [self] call in
            guard let key = call.input["key"]?.stringValue else {
                throw JobError(.invalid, "shared.set: input.key: expected string")
            }
            var cipher: SharedCipher?
            if let name = call.input["cipher"] {
                guard let named = name.stringValue.flatMap(SharedCipher.init(rawValue:)) else {
                    throw JobError(.invalid, "shared.set: input.cipher: expected none, gzip or aes-gcm")
                }
                cipher = named
            }
            if call.readsSecrets {
                // A value made from an encrypted shared value stays encrypted: stored in clear, it
                // would reach the database, `shared.updated` and `shared.get` readers.
                guard cipher == nil || cipher == .aesGCM else {
                    throw JobError(.invalid, "shared.set: input reads an aes-gcm shared value: store it with cipher aes-gcm")
                }
                cipher = .aesGCM
            }
            let value = call.input["value"] ?? .null
            let outcome: Result<Void, ServiceError> = await withCheckedContinuation { continuation in
                setShared(key, value: value, cipher: cipher) { continuation.resume(returning: $0) }
            }
            if case .failure(let error) = outcome { throw JobError(.invalid, "shared.set: \(error.message)") }
            return ["key": .string(key)]
        })
        engine.register(localJob: "shared.get", .inline { [store] call in
            guard let key = call.input["key"]?.stringValue else {
                throw JobError(.invalid, "shared.get: input.key: expected string")
            }
            let value: JSONValue?
            do { value = try store.sharedValue(key) } catch {
                throw JobError((error as? StoreError)?.invalidArgument == nil ? .internal : .invalid, "shared.get: \(error)")
            }
            guard let value else { throw JobError(.invalid, "shared.get: key \"\(key)\" not found") }
            // A secret never lands in a result (journaled, stored, emitted): it reads as a mask.
            return store.sharedCipher(key) == .aesGCM ? .string(SecretMask.replacement) : value
        })
    }

    // MARK: - Cache, workers, stats

    /// `cache.get {url}` (or, an extension, `{key}` for one exact key): the
    /// stored response, fresh or stale, never asking the network; `-32002`
    /// when none. A URL finds the key `GET URL`, else the newest of its
    /// variants (`GET URL auth=…`, `GET URL session=NAME`: requests with
    /// credentials are cached apart), else the same two for the URL without
    /// its query (apis with `cacheIgnoreQuery` store it so). Times are ISO-8601
    /// UTC, as everywhere on the wire. On the read thread: it waits for queued
    /// cache writes first (what a finished job stored, a millisecond or two),
    /// never on the RPC loop.
    public func cachedResponse(url: String?, key: String?,
                               reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let secret = store.credentialKeySecret
        guard let wanted = key ?? url.map({ CacheKey.forURL($0, keyedBy: secret) }) else {
            reply(.failure(ServiceError(.invalidParams, "url: required", data: ["field": "url", "reason": "required"])))
            return
        }
        // The keys to try in order: exact, then variants (`KEY …`); for a URL, again without its query.
        let withoutQuery = key == nil ? url.flatMap { url in url.firstIndex(of: "?").map { CacheKey.forURL(String(url[..<$0]), keyedBy: store.credentialKeySecret) } } : nil
        let candidates = [wanted] + (withoutQuery.map { [$0] } ?? [])
        let exactOnly = key != nil
        reads.run { [store] in
            store.flush()
            var found: (key: String, entry: CachedResponse)?
            do throws(StoreError) {
                for candidate in candidates where found == nil {
                    if let entry = try store.storedResponse(candidate) {
                        found = (candidate, entry)
                    } else if !exactOnly {
                        found = try store.newestStoredResponse(keyPrefix: candidate + " ")
                    }
                }
            } catch {
                reply(.failure(ServiceError(error)))
                return
            }
            guard let (foundKey, entry) = found else {
                reply(.failure(ServiceError.notFound(field: url == nil ? "key" : "url",
                                                     "nothing cached under '\(ServiceError.clip(wanted))'")))
                return
            }
            var o: OrderedDictionary<String, JSONValue> = ["key": .string(foundKey),
                                                           "storedAt": .string(HydraEvent.format(entry.storedAt)),
                                                           "expiresAt": .string(HydraEvent.format(entry.expiresAt))]
            if let etag = entry.value["headers"]?["etag"] { o["etag"] = etag }
            o["result"] = entry.value
            reply(.success(.object(o)))
        }
    }

    /// `cache.remove`: replies with how many cached responses were removed.
    public func removeCached(api: String?, url: String?, prefix: String?,
                             reply: @escaping @Sendable (Result<Int, ServiceError>) -> Void) {
        // A typo in an api's name removes nothing: said, not answered `removed: 0`.
        if let api, configuration.apis[api] == nil {
            reply(.failure(.notFound(field: "api", "unknown api '\(ServiceError.clip(api))'")))
            return
        }
        let bus = engine.bus
        // Cache keys are "GET URL" (only GET responses are cached), with variants "GET URL …" removed alike.
        // A URL's credentials are a digest in the key (see ``CacheKey``); a prefix matches every caller's.
        store.removeResponses(api: api, key: url.map { CacheKey.forURL($0, keyedBy: store.credentialKeySecret) },
                              prefix: prefix.map { "GET " + RemoteSpec.redactingCredentials($0) }) { result in
            switch result {
            case .success(let keys):
                // One event per response removed, keyed as its `cache.updated` was.
                for key in keys {
                    bus.emit(EventName.cacheRemoved, jobId: "", rootJobId: "", stepPath: "") { ["key": .string(key)] }
                }
                reply(.success(keys.count))
            case .failure(let error):
                reply(.failure(ServiceError(error)))
            }
        }
    }

    /// `events.emit`: sends a `custom.NAME` event; returns its seq. A bad name
    /// or a reserved member is `-32602` naming the field.
    public func emit(custom name: String, fields: OrderedDictionary<String, JSONValue>) throws(ServiceError) -> UInt64 {
        do { return try engine.emit(custom: name, fields: fields) } catch { throw ServiceError(error) }
    }

    // MARK: - Auth sessions

    /// `auth.status {name}`; without a name (an extension), every session.
    public func authStatus(_ name: String?) throws(ServiceError) -> JSONValue {
        if let name { try checkAuthName(name) }
        do throws(JobError) {
            if let name { return try engine.authStatus(name).json }
            return ["sessions": .array(try engine.rest.authNames.map { name throws(JobError) in try engine.authStatus(name).json })]
        } catch {
            throw ServiceError.auth(error)
        }
    }

    /// `auth.login {name, username?, password?}` → `{"ok": true, "expiresAt"}`:
    /// always both members (rest.md §1); `expiresAt` is an ISO-8601 UTC time,
    /// or `null` when the token endpoint gave no `expires_in`.
    public func authLogin(_ name: String, username: String?, password: String?,
                          reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        do throws(ServiceError) {
            try checkAuthName(name)
        } catch {
            reply(.failure(error))
            return
        }
        engine.rest.login(name, username: username, password: password) { result in
            switch result {
            case .success(let expiresAt):
                let o: OrderedDictionary<String, JSONValue> = [
                    "ok": true, "expiresAt": expiresAt.map { .string(HydraEvent.format($0)) } ?? .null,
                ]
                reply(.success(.object(o)))
            case .failure(let error):
                reply(.failure(ServiceError.auth(error)))
            }
        }
    }

    /// `auth.logout {name}` → `{"ok": true}`.
    public func authLogout(_ name: String) throws(ServiceError) {
        try checkAuthName(name)
        do { try engine.logout(auth: name) } catch { throw ServiceError.auth(error) }
    }

    /// An `auth.*` call naming a session the `auth` section does not have:
    /// `-32002` (protocol §2: not found), as `worker.pause` with an unknown name.
    private func checkAuthName(_ name: String) throws(ServiceError) {
        guard configuration.auth[name] == nil else { return }
        throw .notFound(field: "name", "unknown auth '\(name)'")
    }

    /// `dummy.set`: replaces the runtime dummy responses; replies how many there are.
    public func setDummyResponses(_ responses: [JSONValue]) throws(ServiceError) -> Int {
        do { return try engine.rest.setDummyResponses(responses) } catch { throw ServiceError(error) }
    }

    /// `dummy.enable`.
    public func setDummiesEnabled(_ enabled: Bool) { engine.rest.setDummiesEnabled(enabled) }

    /// `worker.configure`: new limits for a worker's next tasks and requests;
    /// replies with the limits in force.
    public func configure(worker name: String, maxActive: Int?, maxConnections: Int?,
                          maxHostConnections: Int?) throws(ServiceError) -> JSONValue {
        guard let worker = engine.worker(named: name) else {
            throw ServiceError.notFound(field: "name", "no worker '\(ServiceError.clip(name))'")
        }
        do {
            try worker.configure(maxActive: maxActive, maxConnections: maxConnections,
                                 maxHostConnections: maxHostConnections)
        } catch {
            throw ServiceError(error)
        }
        return worker.stats().json
    }

    /// `worker.list`.
    public func workers() -> JSONValue {
        ["workers": .array(engine.workerStats().map(\.json))]
    }

    /// `worker.pause` / `worker.resume`.
    public func setPaused(_ paused: Bool, worker name: String) throws(ServiceError) {
        guard let worker = engine.worker(named: name) else {
            throw ServiceError.notFound(field: "name", "no worker '\(ServiceError.clip(name))'")
        }
        if paused { worker.pause() } else { worker.resume() }
    }

    /// `hydra.stats`: protocol §5's counters (jobs by state, requests, cache
    /// hits/misses, retries; the RPC layer adds `connections`), each where a
    /// client looks first. `requests` is an object whose total is `sent`
    /// (requests put on the network, every attempt); `retries` is also at the
    /// top level, the same number as `requests.retries`.
    public func stats() -> JSONValue {
        let c = counters.value.withLock { $0 }
        let ended = journal.endings.withLock { $0 }
        let workers = engine.workerStats()
        let rest = engine.rest.stats
        let resources = engine.resources.stats
        let queued = workers.reduce(0) { $0 + $1.queued }
        let active = workers.reduce(0) { $0 + $1.active }
        let unfinished = engine.unfinishedJobs
        let running = min(engine.runningJobs, unfinished)
        return [
            "uptimeSec": .int(Int(Date().timeIntervalSince(started))),
            "jobs": ["submitted": .int(c.submitted), "recovered": .int(c.recovered),
                     "unfinished": .int(unfinished), "queued": .int(unfinished - running), "running": .int(running),
                     "succeeded": .int(ended.succeeded), "failed": .int(ended.failed), "cancelled": .int(ended.cancelled)],
            "steps": ["queued": .int(queued), "active": .int(active),
                      "done": .int(workers.reduce(0) { $0 + $1.done }), "failed": .int(workers.reduce(0) { $0 + $1.failed })],
            "events": ["lastSeq": .int(Int(engine.bus.lastSeq))],
            "retries": .int(rest.retries),
            "requests": ["sent": .int(rest.requests), "retries": .int(rest.retries), "failed": .int(rest.failedRequests),
                         "dummy": .int(rest.dummyResponses), "merged": .int(rest.merged)],
            "cache": ["hits": .int(rest.cacheHits), "misses": .int(rest.cacheMisses)],
            "resources": ["hits": ["memory": .int(resources.memoryHits), "disk": .int(resources.diskHits)],
                          "misses": .int(resources.misses), "revalidated": .int(resources.revalidated),
                          "merged": .int(resources.merged), "requests": .int(resources.requests),
                          "resumed": .int(resources.resumed)],
        ]
    }

    /// Seconds since the service started.
    public var uptime: Double { Date().timeIntervalSince(started) }

    /// Cuts a ``shutdown(gracePeriod:)`` under way short (a second SIGTERM):
    /// unfinished jobs are kept for the next start. Any thread; also before
    /// the shutdown began (it then ends at once).
    public func endGracePeriod() { engine.endGracePeriod() }

    /// Graceful stop: refuse new work, let running jobs finish within
    /// `gracePeriod` (the rest stay in the store and resume at the next start),
    /// stop the engine, flush and close the store.
    public func shutdown(gracePeriod: Duration) async -> Bool {
        let drained = await engine.shutdown(gracePeriod: gracePeriod)
        reads.shutdown()
        store.flush()
        store.close()
        return drained
    }
}
