import Crypto
import Foundation
import HydraCore
import HydraHTTP
import HydraLoop
import HydraREST
import OrderedCollections

/// Runs `resource` jobs on one remote worker: serves a fresh copy from the
/// memory tier or the repository, else fetches it (conditionally when a copy
/// with validators exists) on the worker's shared ``HTTPClient``, one
/// transfer per key however many jobs ask for it, and stores it (file written
/// to a temporary name and renamed, then the index entry committed) before
/// the jobs finish.
///
/// Loop-confined: every method runs on the worker's loop thread, as do the
/// transfer completions, retry timers and the index's commit callbacks (hopped
/// back with `loop.execute`) and the answers of work handed to libuv's thread
/// pool. On this thread: reading a copy from disk (a disk hit, a revalidated
/// copy, a new copy's bytes for the memory tier) and streaming a plain body
/// larger than ``spoolBytes`` to its file, bounded by `resources.maxBytes`.
/// On the pool (``HydraLoop/EventLoop/offload(_:then:)``): a new copy's
/// SHA-256, remakers, gzip and aes-gcm, and writing such copies and the plain
/// ones kept in memory (``CopyWriter``). On the chores
/// thread (``ResourceManager/removeCopies(_:reason:since:done:)``): removing a
/// corrupt copy. Putting a copy in place is announced to the manager's
/// ``ReplacementWatch`` (whose lock this thread may wait on for one `unlink`).
final class ResourceExecutor: JobExecutor {
    private let manager: ResourceManager
    private let loop: EventLoop
    private let client: HTTPClient
    private let memory: MemoryTier
    /// Transfers in flight by key.
    @exclusivity(unchecked) private var fetches: [String: Fetch] = [:]
    /// The key each waiting job (by task token) waits for.
    @exclusivity(unchecked) private var waiting: [UInt64: String] = [:]
    /// Jobs waiting for another worker's transfer of their key (see ``TransferRegistry``), by task token.
    @exclusivity(unchecked) private var following: [UInt64: Waiter] = [:]
    /// Jobs waiting out their own retry delay before they start again (``retryOrFail(_:_:)``), by task token.
    @exclusivity(unchecked) private var delayed: [UInt64: Waiter] = [:]
    /// The next hand-over of recorded uses to the index (``PendingUses``): once a second, not per hit.
    @exclusivity(unchecked) private var touchTimer: ScheduledTask?
    /// Keys of plain `url` requests (see ``plainKey(_:)``), at most 4,096.
    @exclusivity(unchecked) private var plainKeys: [String: String] = [:]
    /// The last plain `url` looked up and its key: a hot resource's jobs ask
    /// for the same URL over and over, and comparing it costs less than hashing it.
    @exclusivity(unchecked) private var lastPlainKey: (url: String, key: String)?
    /// Whether a plain `url` request can carry no credential (their content is
    /// served without routing, so without the masking of the request's secrets).
    private let plainURLsCarryNoCredentials: Bool
    /// Set by ``close()``: work handed to the thread pool that comes back later finds it.
    @exclusivity(unchecked) private var closed = false
    /// Whether the manager knows this worker's memory tier (``ResourceManager/memoryTiers``).
    @exclusivity(unchecked) private var registeredTier = false
    /// The size and name of ``remakePool``: the worker's `threads`.
    private let remakeThreads: (count: Int, name: String)
    /// Where remakers run (the worker's blocking pool, resources.md §5),
    /// started by the first of them. Loop thread only.
    @exclusivity(unchecked) private var startedRemakePool: BlockingPool?
    private var remakePool: BlockingPool {
        if let startedRemakePool { return startedRemakePool }
        let pool = BlockingPool(threads: remakeThreads.count, name: remakeThreads.name)
        startedRemakePool = pool
        return pool
    }

    /// The response headers a copy keeps.
    private struct Meta {
        var type: String?
        let etag: String?
        let modified: String?
        let status: Int
    }

    /// A plain copy no larger than this is received in memory and kept like
    /// a remade one (``CopyWriter``, on the thread pool: its digest taken, its
    /// temporary file opened, written in one piece and renamed into place;
    /// see ``HydraHTTP/HTTPRequest/spoolBytes``); a larger one is streamed to
    /// its file as it arrives, on this loop. At most this much per transfer in flight.
    static let spoolBytes = 1 << 20

    /// `application/gzip` or `application/x-gzip`, parameters and case aside.
    static func isGzipType(_ type: String) -> Bool {
        let media = type.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return media == "application/gzip" || media == "application/x-gzip"
    }

    /// A job waiting for a resource.
    private struct Waiter {
        let task: WorkTask
        let handle: TaskHandle
        let spec: ResourceSpec

        /// Whether the job takes content that came with `status` (its `expect`, default 2xx).
        func expects(_ status: Int) -> Bool {
            spec.request.expect.map { $0.contains(status) } ?? (200...299).contains(status)
        }
        /// True for a job that wants the key with another cipher than the
        /// transfer under way: it starts again once that transfer ends (and
        /// then keeps a copy of its own), rather than being served a copy kept
        /// another way (an `aes-gcm` copy's content must never reach a result).
        var startsAgain = false
        /// The credentials its request sends (known once routed): masked in the
        /// content its result carries (`as` text, json, base64), as in a remote job's body.
        var secrets: [String] = []
        /// Its own retry policy and per-attempt timeout, as routed: a job that
        /// shares a transfer is judged by them, not by the first job's.
        var retry = RetryPolicy()
        var timeoutMs: Int?
        /// The attempts this job was charged (a job that joins a transfer
        /// under way counts it as an attempt of its own), and when its current
        /// attempt times out (uptime, ms; nil between attempts).
        var attempts = 0
        var deadline: UInt64?
        /// While it follows another worker's transfer: the end of its attempt.
        var followTimer: ScheduledTask?

        /// Starts an attempt of this job at `now` (uptime ms).
        mutating func startAttempt(at now: UInt64) {
            attempts += 1
            deadline = timeoutMs.map { now &+ UInt64(max(1, $0)) } ?? .max
        }

        /// The delay before its next attempt, when it has one left after
        /// `error`: the server's `Retry-After` when it gave one (honoured in
        /// full, protocol §4, as for remote jobs), else the policy's backoff.
        func retryDelay(after error: JobError, retryAfterMs: Int? = nil) -> Int? {
            guard RoutedRequest.isRetryable(error), attempts < retry.maxAttempts else { return nil }
            return max(0, min(retryAfterMs ?? retry.delayMs(afterAttempt: attempts), RetryPolicy.maxDelayMs))
        }
    }

    /// Milliseconds of a monotonic clock, for the jobs' own deadlines.
    private static func uptimeMs() -> UInt64 { DispatchTime.now().uptimeNanoseconds / 1_000_000 }

    /// One transfer of a key, across its attempts, and the jobs waiting for it.
    private final class Fetch {
        let key: String
        let routed: RoutedRequest
        @exclusivity(unchecked) var waiters: [Waiter]
        /// The copy being revalidated, if any (its validators are sent).
        @exclusivity(unchecked) var previous: ResourceRecord?
        @exclusivity(unchecked) var transfer: HTTPTransferID?
        @exclusivity(unchecked) var timer: ScheduledTask?
        /// Fires at the earliest deadline of a job the transfer serves that is
        /// earlier than the attempt's own end (``attemptEnds``).
        @exclusivity(unchecked) var deadlineTimer: ScheduledTask?
        /// When the attempt under way times out (uptime ms): the latest deadline of its jobs.
        @exclusivity(unchecked) var attemptEnds: UInt64 = .max
        /// What an attempt cut mid-body received (the response's headers and the bytes so far) and
        /// the validator, if any, the rest is asked for with: the next attempt sends `Range` (+ `If-Range`).
        /// (`bytes` holds the bytes so far of a body kept in memory; a streamed one's are in `file`.)
        @exclusivity(unchecked) var resume: (headers: HTTPHeaderBlock, bytes: [UInt8], count: Int, validator: String?)?
        /// How the copy is kept at rest, and its remaker: the first job's (the key covers the remaker;
        /// a job with another cipher waits for this transfer and starts again).
        let cipher: ResourceCipher
        let remaker: String?
        let remakeOptions: JSONValue?
        /// A plain copy (no cipher, no remaker) is streamed to its temporary file as it arrives
        /// (resources.md: never a whole large body in memory) once it outgrows ``spoolBytes``;
        /// its SHA-256 is taken off the loop.
        var streams: Bool { cipher == .none && remaker == nil }
        /// The URL as the index and the events show it: without a `user:password` part.
        var shownURL: String { RemoteSpec.redactingCredentials(routed.http.url) }
        @exclusivity(unchecked) var file: StateFileWriter?
        /// The OAuth2 token the attempt under way carries (``RoutedRequest/authSession``).
        @exclusivity(unchecked) var token: String?
        /// The attempt waits for its session's token (no transfer yet).
        @exclusivity(unchecked) var waitingForToken = false
        /// A `401` already had the request sent again with a new token (once, rest.md §1).
        @exclusivity(unchecked) var reauthorized = false

        init(key: String, routed: RoutedRequest, first: Waiter, previous: ResourceRecord?) {
            self.key = key
            self.routed = routed
            waiters = [first]
            self.previous = previous
            cipher = first.spec.cipher
            remaker = first.spec.remaker
            remakeOptions = first.spec.remakeOptions
        }

        /// The jobs this transfer is for (not those that start again after it).
        var served: [Waiter] { waiters.filter { !$0.startsAgain } }

        /// The digests the content may have: nil when some job takes any
        /// (gave no `sha256`), else those the jobs gave. A copy no job accepts is not kept.
        var acceptedDigests: Set<String>? {
            var digests: Set<String> = []
            for waiter in served {
                guard let digest = waiter.spec.sha256 else { return nil }
                digests.insert(digest)
            }
            return digests.isEmpty ? nil : digests
        }

        /// Removes the temporary file of a fetch that ends without a copy.
        func discardFile() {
            file?.discard()
            file = nil
        }
    }

    init(manager: ResourceManager, worker: WorkerContext) {
        self.manager = manager
        remakeThreads = (worker.configuration.threads, "hydra-\(worker.name)-remake")
        // A `url` alone carries no credential only when no server is configured (a URL
        // may be one's, with its headers and auth); else every job is routed first.
        let configuration = manager.rest.configuration
        plainURLsCarryNoCredentials = configuration.servers.isEmpty
        loop = worker.loop
        client = RESTManager.httpClient(on: worker)
        memory = MemoryTier(capacity: manager.memoryBytesPerExecutor) { [unowned manager] change in
            manager.memoryBytes.add(change, ordering: .relaxed)
        }
    }

    /// The key of a request that is a plain `url` (no query, path variables,
    /// server, api or remaker): its routed URL is that URL, so the key is known
    /// without routing it, and remembered (bounded), so a memory hit costs a
    /// dictionary lookup instead of routing and a SHA-256 (resources.md's
    /// memory-hit row).
    private func plainKey(_ spec: ResourceSpec) -> String? {
        let r = spec.request
        guard plainURLsCarryNoCredentials, let url = r.url, r.query.isEmpty, r.pathVars.isEmpty, r.server == nil, r.api == nil,
              r.endpoint == nil, r.auth == nil, r.headers.isEmpty, spec.remaker == nil,
              RemoteSpec.credentials(in: url) == nil else { return nil }
        if let last = lastPlainKey, last.url == url { return last.key }
        let key: String
        if let known = plainKeys[url] {
            key = known
        } else {
            key = ResourceKey.make(url: url, remaker: nil, options: nil)
            if plainKeys.count >= 4096 { plainKeys.removeAll(keepingCapacity: true) }
            plainKeys[url] = key
        }
        lastPlainKey = (url, key)
        return key
    }

    func start(_ task: WorkTask, handle: TaskHandle) {
        begin(task, handle: handle, counted: false)
    }

    /// Serves or fetches a job's resource. `counted`: the job started before
    /// (it waited for a transfer, here or on another worker) and was counted
    /// then: `resource.stats` counts each job once, as a memory or disk hit or
    /// a miss (`merged` and `revalidated` count misses too). `attempts`: those
    /// it was charged before (it starts again after a failure it retries).
    private func begin(_ task: WorkTask, handle: TaskHandle, counted: Bool, attempts: Int = 0) {
        let statistics: ResourceStatistics? = counted ? nil : manager.statistics
        if closed {
            // A job that waited for another cipher's fetch, started again as the worker closes:
            // the HTTP client is closed (the jobs of a closing worker end as cancelled here).
            handle.finish(.failure(JobError(.cancelled, "cancelled")))
            return
        }
        guard case .resource(let spec) = task.spec.body else {
            handle.finish(.failure(JobError(.internal, "not a resource job")))
            return
        }
        var waiter = Waiter(task: task, handle: handle, spec: spec)
        waiter.attempts = attempts
        let now = Date().timeIntervalSince1970
        let maxAge = Double(spec.maxAgeSec ?? manager.settings.maxAgeSec)
        func fresh(storedAt: Double) -> Bool { spec.mode == .only || now - storedAt < maxAge }
        if !registeredTier {
            // Here, on the loop, the first time: the manager reaches the tier through its loop.
            registeredTier = true
            manager.memoryTiers.withLock { $0.append(LoopBound(memory, loop: loop)) }
        }
        memory.forget(ifRemovalsMovedTo: manager.removals.load(ordering: .acquiring))
        // Memory first: a fresh copy (any copy in mode only) kept the way the job asks
        // (its cipher; its `sha256` when given) is served as it is. For a plain `url`
        // the key is known without routing the request (see `plainKey`).
        func memoryHit(_ key: String) -> Bool {
            // The entry's fields are read in place: passing its record on copied six
            // strings and released them again, a tenth of the worker's work per hit.
            guard spec.mode != .refresh, let entry = memory.get(key), entry.record.cipher == spec.cipher,
                  fresh(storedAt: entry.record.storedAt), waiter.expects(entry.record.status) else { return false }
            // Another digest than the job's: not this job's content (see the disk check below).
            if let expected = spec.sha256, expected != ResourceManager.contentDigest(entry.record, entry.content) { return false }
            statistics?.countMemoryHit()
            touch(key, at: now)
            handle.skipped(reason: "resource")
            if !spec.wantsContent {
                // What `finish` would do: the tier keeps whole copies only, and their
                // status, digest and cipher were checked just above.
                handle.succeed(building: entry.result)
            } else {
                finish(waiter, record: entry.record, content: entry.content, source: "memory", kept: entry)
            }
            return true
        }
        let plain = plainKey(spec)
        if let plain, memoryHit(plain) { return }
        let routed: RoutedRequest
        do {
            routed = try manager.rest.routeGET(spec.request, timeoutMs: task.spec.timeoutMs)
        } catch {
            handle.finish(.failure(error))
            return
        }
        waiter.secrets = routed.secrets
        waiter.retry = routed.retry
        waiter.timeoutMs = routed.http.timeoutMilliseconds
        let key = plain ?? ResourceKey.make(url: routed.http.url, remaker: spec.remaker, options: spec.remakeOptions)
        if plain == nil, memoryHit(key) { return }
        // Then disk. A copy kept with another cipher is no copy for this job: it
        // fetches and keeps its own in its place.
        var onDisk: (record: ResourceRecord, content: [UInt8])?
        let mark = manager.replacements.mark()
        let kept = try? manager.index.resource(key: key)
        // An aes-gcm copy is never replaced by one kept in clear (or merely compressed): a job
        // that forgot `cipher` would otherwise undo the encryption another job asked for.
        if let kept, kept.cipher == .aesGCM, spec.cipher != .aesGCM {
            handle.finish(.failure(JobError(.invalid, "cipher: this resource is kept with aes-gcm: ask for it with \"cipher\": \"aes-gcm\" (and read it with resource.read)")))
            return
        }
        if let record = kept, record.cipher == spec.cipher {
            switch manager.load(record) {
            case .content(let content):
                // `load` checked the file against the index: this copy is intact. When the job
                // gave another digest it is not the content the job wants: fetched again, whole
                // (no validators: a 304 would keep the wrong bytes), and the copy stays unless
                // content with the job's digest replaces it (resources.md: a failure never
                // replaces or removes a good copy).
                // Content kept with a status the job does not expect (a 404 kept for another
                // job's `expect: [404]`) is no answer either: fetched again, whole.
                if spec.sha256 == nil || spec.sha256 == ResourceManager.contentDigest(record, content),
                   waiter.expects(record.status) {
                    onDisk = (record, content)
                }
            case .unreadable:
                // A missing or corrupt file (its bytes no longer match the index's digest):
                // the entry goes, the copy is fetched again (resources.md: a mismatch on disk).
                // Unless a new copy was being put in place meanwhile (its file renamed, its
                // entry not yet committed): that one is good; the fetch below serves the job.
                if !manager.replacements.mayHaveReplaced(since: mark) { drop(record, since: mark.generation) }
            case .sealed:
                break  // not for this job (its cipher needs the key, checked at submit)
            }
        }
        if spec.mode != .refresh, let (record, content) = onDisk, fresh(storedAt: record.storedAt) {
            statistics?.countDiskHit()
            remember(record, content)
            touch(key, at: now)
            handle.skipped(reason: "resource")
            finish(waiter, record: record, content: content, source: "disk")
            return
        }
        if spec.mode == .only {
            handle.finish(.failure(JobError(.invalid, "not in repository")))
            return
        }
        statistics?.countMiss()
        waiting[task.token] = key
        if let fetch = fetches[key] {
            if fetch.cipher == spec.cipher {
                statistics?.countMerged()
                // Joined while an attempt is under way: that attempt is this job's
                // too, bounded by its own timeout (between attempts: the next one).
                if fetch.transfer != nil {
                    waiter.startAttempt(at: Self.uptimeMs())
                    fetch.waiters.append(waiter)
                    armDeadlines(fetch)
                } else {
                    fetch.waiters.append(waiter)
                }
            } else {
                var later = waiter
                later.startsAgain = true
                fetch.waiters.append(later)
            }
            return
        }
        // Another worker fetching the key: this job waits for that transfer, then starts again.
        let token = task.token
        let resume = LoopBound({ [weak self] (failure: JobError?) in self?.followed(token, failure) }, loop: loop)
        let home = loop
        if manager.transfers.join(key, owner: ObjectIdentifier(self), follower: { failure in
            _ = home.execute { resume.value(failure) }
        }) == .following {
            waiting[task.token] = nil
            statistics?.countMerged()
            waiter.startAttempt(at: Self.uptimeMs())
            following[task.token] = waiter
            armFollowTimer(token)
            return
        }
        let previous = onDisk.flatMap { $0.record.etag != nil || $0.record.lastModified != nil ? $0.record : nil }
        let fetch = Fetch(key: key, routed: routed, first: waiter, previous: previous)
        fetches[key] = fetch
        attempt(fetch)
    }

    /// The other worker's transfer a job followed ended: the job fails with
    /// its network failure, or starts again (served the copy that transfer
    /// stored, or fetching for itself).
    private func followed(_ token: UInt64, _ failure: JobError?) {
        guard let waiter = following.removeValue(forKey: token) else { return }  // cancelled or timed out meanwhile
        waiter.followTimer?.cancel()
        if let failure, failure.kind == .timeout, let deadline = waiter.deadline, deadline > Self.uptimeMs() &+ 20 {
            // The other job's timeout, not this one's: it starts again at once, within its own.
            begin(waiter.task, handle: waiter.handle, counted: true, attempts: waiter.attempts - 1)
        } else if let failure {
            retryOrFail(waiter, failure)
        } else {
            begin(waiter.task, handle: waiter.handle, counted: true, attempts: waiter.attempts - 1)
        }
    }

    /// Bounds a job that follows another worker's transfer by its own timeout.
    private func armFollowTimer(_ token: UInt64) {
        guard let waiter = following[token], let deadline = waiter.deadline, deadline != .max else { return }
        let now = Self.uptimeMs()
        following[token]?.followTimer = loop.schedule(afterMilliseconds: deadline > now ? deadline - now : 0) { [unowned self] in
            guard let waiter = following.removeValue(forKey: token) else { return }
            retryOrFail(waiter, Self.ownTimeout(waiter))
        }
    }

    /// A job that no longer waits for a transfer (it followed one that failed,
    /// or its own time ran out) after `error`: it starts again after its own
    /// delay when it has attempts left, else fails.
    private func retryOrFail(_ waiter: Waiter, _ error: JobError) {
        guard let delay = waiter.retryDelay(after: error) else {
            waiter.handle.finish(.failure(error))
            return
        }
        waiter.handle.retrying(attempt: waiter.attempts + 1, delayMs: delay, error: error)
        let token = waiter.task.token
        var later = waiter
        later.deadline = nil
        later.followTimer = loop.schedule(afterMilliseconds: UInt64(delay)) { [unowned self] in
            guard let waiter = delayed.removeValue(forKey: token) else { return }
            begin(waiter.task, handle: waiter.handle, counted: true, attempts: waiter.attempts)
        }
        delayed[token] = later  // cancellable while it waits
    }

    /// The failure of a job whose own timeout ran out while it waited for a transfer it shares.
    private static func ownTimeout(_ waiter: Waiter) -> JobError {
        JobError(.timeout, "timed out after \(waiter.timeoutMs ?? 0) ms waiting for this resource's transfer (shared with another job)")
    }

    /// The failure of a job whose own timeout ran out while its attempt waited for its session's token.
    private static func tokenTimeout(_ waiter: Waiter, _ fetch: Fetch) -> JobError {
        JobError(.timeout, "timed out after \(waiter.timeoutMs ?? 0) ms waiting for the token of auth '\(fetch.routed.authSession ?? "")'")
    }

    /// The transfer of `fetch`'s key ends here (with `failure`, when it failed):
    /// forgotten, and the jobs of other workers that followed it go on.
    private func forget(_ fetch: Fetch, failure: JobError? = nil) {
        guard fetches[fetch.key] === fetch else { return }
        fetches[fetch.key] = nil
        manager.transfers.ended(fetch.key, by: ObjectIdentifier(self), failure: failure)
    }

    func cancel(_ task: WorkTask, handle: TaskHandle) {
        if let waiter = following.removeValue(forKey: task.token) ?? delayed.removeValue(forKey: task.token) {
            waiter.followTimer?.cancel()
            handle.finish(.failure(JobError(.cancelled, "cancelled")))
            return
        }
        guard let key = waiting.removeValue(forKey: task.token), let fetch = fetches[key] else { return }
        fetch.waiters.removeAll { $0.task.token == task.token }
        handle.finish(.failure(JobError(.cancelled, "cancelled")))
        leftBehind(fetch)
    }

    /// Some of `fetch`'s jobs went: with none left the transfer stops (its
    /// completion finds no waiter), else the next deadline is armed again.
    private func leftBehind(_ fetch: Fetch) {
        guard fetch.waiters.isEmpty else {
            armDeadlines(fetch)
            return
        }
        fetch.timer?.cancel()
        fetch.timer = nil
        fetch.deadlineTimer?.cancel()
        fetch.deadlineTimer = nil
        if let transfer = fetch.transfer { client.cancel(transfer) } else { forget(fetch) }
    }

    func close() {
        closed = true
        for fetch in fetches.values {
            fetch.timer?.cancel()
            fetch.deadlineTimer?.cancel()
            if let transfer = fetch.transfer { client.cancel(transfer) }
            manager.transfers.ended(fetch.key, by: ObjectIdentifier(self))
        }
        fetches.removeAll()
        waiting.removeAll()
        for waiter in following.values { waiter.followTimer?.cancel() }
        following.removeAll()
        for waiter in delayed.values {
            waiter.followTimer?.cancel()
            waiter.handle.finish(.failure(JobError(.cancelled, "cancelled")))
        }
        delayed.removeAll()
        touchTimer?.cancel()
        flushTouches()
        memory.removeAll()
        startedRemakePool?.shutdown()
        // The client is the REST manager's: it closes it.
    }

    // MARK: - Transfers

    /// Starts an attempt of `fetch`: its request goes out at once, or once its
    /// OAuth2 session has a token (the wait counts against each job's time).
    private func attempt(_ fetch: Fetch) {
        // Each job it serves starts an attempt of its own (unless one under way
        // goes on: a timeout that was not its own).
        let now = Self.uptimeMs()
        for i in fetch.waiters.indices where !fetch.waiters[i].startsAgain && fetch.waiters[i].deadline == nil {
            fetch.waiters[i].startAttempt(at: now)
        }
        guard let session = fetch.routed.authSession else {
            send(fetch)
            return
        }
        // As a remote job's (rest.md §1): the session's token, fetched once for
        // every request that needs it; told at once when one is fresh.
        fetch.waitingForToken = true
        manager.rest.token(of: session, on: loop, client: client) { [unowned self] result in
            guard fetch.waitingForToken else { return }  // the fetch ended meanwhile
            fetch.waitingForToken = false
            fetch.deadlineTimer?.cancel()
            fetch.deadlineTimer = nil
            guard stillWanted(fetch) else { return }
            switch result {
            case .success(let token):
                fetch.token = token
                // What the server sends back is masked with the token too, as for a remote job.
                for i in fetch.waiters.indices where !fetch.waiters[i].secrets.contains(token) {
                    fetch.waiters[i].secrets.append(token)
                }
                send(fetch)
            case .failure(let error):
                judge(fetch, error)
            }
        }
        if fetch.waitingForToken { armDeadlines(fetch) }
    }

    /// Sends `fetch`'s request; the transfer lasts as long as the job that allows the longest.
    private func send(_ fetch: Fetch) {
        manager.statistics.countRequest()
        var http = fetch.routed.http
        let now = Self.uptimeMs()
        if let token = fetch.token {
            http.headers.removeAll { $0.hasName("authorization") }
            http.headers.append(HTTPHeader("Authorization", "Bearer " + token))
        }
        if !fetch.served.isEmpty {
            fetch.attemptEnds = fetch.served.map { $0.deadline ?? .max }.max() ?? .max
            http.timeoutMilliseconds = fetch.attemptEnds == .max ? nil : Int(clamping: max(1, fetch.attemptEnds &- now))
        }
        // Every body can be a bomb: nothing larger than the repository, and a body
        // kept in memory to be remade, compressed or sealed no larger than
        // `defaults.maxBodyBytes` (protocol §4: the limit of bodies kept in memory).
        let limit = fetch.streams ? manager.settings.maxBytes : manager.inMemoryLimit
        http.maxBodyBytes = limit
        if fetch.streams {
            http.diskReserve = manager.rest.configuration.state.diskReserve
            // The file is opened when the body spills (see `spoolBytes`), unless an
            // earlier attempt opened it: a resume writes after the bytes it keeps there.
            if fetch.file == nil { fetch.resume = nil }
            http.saveToFile = fetch.file?.descriptor
            http.resumeFileAt = fetch.resume?.count
            http.spoolBytes = min(ResourceExecutor.spoolBytes, limit)
        }
        if let resume = fetch.resume {
            // The rest of an interrupted body; with a validator, only if it is still
            // the same (else the server sends it all).
            http.headers.append(HTTPHeader("Range", "bytes=\(resume.count)-"))
            // The kept bytes and the rest together stay within the limit.
            http.maxBodyBytes = max(0, limit - resume.count)
            if let validator = resume.validator { http.headers.append(HTTPHeader("If-Range", validator)) }
            http.acceptEncoding = false
        } else if let previous = fetch.previous {
            if let etag = previous.etag { http.headers.append(HTTPHeader("If-None-Match", etag)) }
            if let modified = previous.lastModified { http.headers.append(HTTPHeader("If-Modified-Since", modified)) }
        }
        // `job.progress` for every job the transfer serves (protocol §6: downloads):
        // at most ten a second, plus the last, as for `saveAs`.
        let progress: HTTPClient.Progress = { progress in
            for waiter in fetch.waiters where !waiter.startsAgain {
                waiter.handle.progress(bytes: progress.bytes, totalBytes: progress.totalBytes)
            }
        }
        do {
            let spillFile: HTTPClient.SpillFile? = fetch.streams ? { [unowned self] in self.openFile(fetch) } : nil
            fetch.transfer = try client.start(http, progress: http.reportsProgress ? progress : nil,
                                              spillFile: spillFile) { [unowned self] result in
                fetch.transfer = nil
                fetch.deadlineTimer?.cancel()
                fetch.deadlineTimer = nil
                self.completed(fetch, result)
            }
            armDeadlines(fetch)
        } catch {
            fail(fetch, JobError(.invalid, error.message))
        }
    }

    /// The temporary file of `fetch`'s plain copy, opened when its body first
    /// spills out of memory (see ``spoolBytes``); kept across its attempts.
    private func openFile(_ fetch: Fetch) -> Result<Int32, HTTPFailure> {
        if let file = fetch.file { return .success(file.descriptor) }
        do throws(JobError) {
            let file = try manager.rest.openStateFile(manager.components(of: fetch.key))
            fetch.file = file
            return .success(file.descriptor)
        } catch {
            return .failure(HTTPFailure(.invalid, error.message))
        }
    }

    private func completed(_ fetch: Fetch, _ result: Result<HTTPResponse, HTTPFailure>) {
        guard !fetch.waiters.isEmpty else {
            forget(fetch)
            fetch.discardFile()
            return
        }
        let error: JobError
        var retryAfterMs: Int?
        switch result {
        case .success(var response):
            if response.status == 401, let token = fetch.token, let session = fetch.routed.authSession, !fetch.reauthorized {
                // Once on a 401 (rest.md §1): a new token and the same request again,
                // within the attempt under way. A session that cannot get one by
                // itself (a password grant without a refresh token) fails it with this 401.
                fetch.reauthorized = true
                fetch.token = nil
                if manager.rest.rejected(token, of: session) {
                    fetch.resume = nil
                    attempt(fetch)
                    return
                }
            }
            if let resume = fetch.resume {
                fetch.resume = nil
                if response.status == 206 {
                    // Content-Range must start where the kept bytes end and reach the end of
                    // the body with the bytes that came; else start over.
                    guard let range = response.header("content-range"),
                          ResourceExecutor.completes(range, from: resume.count, received: response.bodyBytes) else {
                        error = JobError(.network, "the server's resumed range does not complete the body (\(response.header("content-range") ?? "no Content-Range"), \(resume.count) bytes kept, \(response.bodyBytes) received)")
                        break
                    }
                    // The rest of the same version only: no file spliced from two.
                    if let reason = ResourceExecutor.otherVersion(response, range: range, resuming: resume.headers, validator: resume.validator) {
                        error = JobError(.network, reason)
                        break
                    }
                    manager.statistics.countResumed()
                    response = HTTPResponse(status: 200, headers: resume.headers, body: resume.bytes + response.body,
                                            bodyBytes: resume.count + response.bodyBytes)
                } else if fetch.streams, (200...299).contains(response.status), let file = fetch.file {
                    // The whole body again (the file changed, or the server ignores Range): it
                    // went after the kept bytes. Moved to the file's start off the loop, it is
                    // kept like any whole body (not fetched a second time).
                    let contents = file.written
                    let kept = resume.count
                    let whole = response
                    loop.offload({ Result { () throws(JobError) in try contents.dropFirst(kept) } }) { [self] moved in
                        guard stillWanted(fetch) else { return }
                        switch moved {
                        case .success: completed(fetch, .success(whole))
                        case .failure(let error): fail(fetch, error)
                        }
                    }
                    return
                }
            }
            if response.status == 304, let previous = fetch.previous {
                revalidated(fetch, previous, response)
                return
            }
            // A 206 here answers a Range this request did not send (a resumed one is handled
            // above): part of a body, never kept as the whole resource, whatever `expect` says.
            if response.status == 206 {
                error = JobError(.http, "HTTP 206: a part of the body, not the whole resource (no Range was asked for): nothing kept",
                                 status: 206)
            } else if fetch.served.contains(where: { $0.expects(response.status) }) {
                store(fetch, response)
                return
            } else {
                error = JobError(.http, "HTTP \(response.status)", status: response.status)
                if RoutedRequest.isRetryable(error) { retryAfterMs = RoutedRequest.retryAfterMilliseconds(response) }
            }
        case .failure(let failure):
            keepForResume(fetch, failure.partial)
            switch failure.kind {
            case .cancelled: error = JobError(.cancelled, "cancelled")
            case .timeout: error = JobError(.timeout, failure.message)
            case .network: error = JobError(.network, failure.message)
            case .tls: error = JobError(.tls, failure.message)
            case .invalid: error = JobError(.invalid, failure.message)
            case .diskFull: error = JobError(.tooLarge, failure.message)
            case .tooLarge:
                error = fetch.streams
                    ? JobError(.tooLarge, "the resource is larger than resources.maxBytes (\(manager.settings.maxBytes) bytes)")
                    : JobError(.tooLarge, "the resource is larger than \(manager.inMemoryLimit) bytes: a copy remade or kept with a cipher is made in memory (defaults.maxBodyBytes, or resources.maxBytes when smaller)")
            }
        }
        judge(fetch, error, retryAfterMs: retryAfterMs)  // a failure never touches the good copy
    }

    /// A failed attempt, judged for each job it served by that job's own
    /// policy: a job with attempts left is told `job.retrying` (its own delay)
    /// and the transfer is tried again after the shortest of those delays; a
    /// job with none fails. A timeout that came before a job's own deadline
    /// (the attempt lasted as long as another job allowed) is not that job's:
    /// its attempt goes on in the next one, started at once.
    private func judge(_ fetch: Fetch, _ error: JobError, retryAfterMs: Int? = nil) {
        let now = Self.uptimeMs()
        var next: Int?
        var failed: [Waiter] = []
        for i in fetch.waiters.indices.reversed() where !fetch.waiters[i].startsAgain {
            let waiter = fetch.waiters[i]
            if error.kind == .timeout, let deadline = waiter.deadline, deadline != .max, deadline > now &+ 20 {
                next = 0
                continue
            }
            if let delay = waiter.retryDelay(after: error, retryAfterMs: retryAfterMs) {
                waiter.handle.retrying(attempt: waiter.attempts + 1, delayMs: delay, error: error)
                fetch.waiters[i].deadline = nil
                next = min(next ?? delay, delay)
            } else {
                failed.append(fetch.waiters.remove(at: i))
            }
        }
        guard let next, !fetch.served.isEmpty else {
            // Nobody tries again: the fetch ends (those that wait to start again do).
            fetch.waiters += failed.reversed()
            fail(fetch, error)
            return
        }
        for waiter in failed.reversed() {
            waiting[waiter.task.token] = nil
            waiter.handle.finish(.failure(error))
        }
        fetch.timer = loop.schedule(afterMilliseconds: UInt64(next)) { [unowned self] in
            fetch.timer = nil
            self.attempt(fetch)
        }
    }

    /// Arms `fetch`'s timer for the earliest deadline of a job it serves that
    /// comes before the attempt's own end (the attempt is then cut for no one).
    private func armDeadlines(_ fetch: Fetch) {
        fetch.deadlineTimer?.cancel()
        fetch.deadlineTimer = nil
        // While the attempt waits for its token, every job's own deadline counts.
        guard fetch.transfer != nil || fetch.waitingForToken,
              let earliest = fetch.served.compactMap(\.deadline).min(),
              earliest < fetch.attemptEnds || fetch.waitingForToken else { return }
        let now = Self.uptimeMs()
        fetch.deadlineTimer = loop.schedule(afterMilliseconds: earliest > now ? earliest - now : 0) { [unowned self] in
            fetch.deadlineTimer = nil
            expireDeadlines(fetch)
        }
    }

    /// The jobs of `fetch` whose own time ran out while its transfer goes on
    /// for others: each retries by its own policy (waiting on, with a new
    /// deadline after its delay) or fails with kind `timeout`.
    private func expireDeadlines(_ fetch: Fetch) {
        guard fetch.transfer != nil || fetch.waitingForToken else { return }
        let now = Self.uptimeMs()
        var failed: [(Waiter, JobError)] = []
        for i in fetch.waiters.indices.reversed() where !fetch.waiters[i].startsAgain {
            guard let deadline = fetch.waiters[i].deadline, deadline <= now else { continue }
            let waiter = fetch.waiters[i]
            let error = fetch.waitingForToken ? Self.tokenTimeout(waiter, fetch) : Self.ownTimeout(waiter)
            if let delay = waiter.retryDelay(after: error) {
                waiter.handle.retrying(attempt: waiter.attempts + 1, delayMs: delay, error: error)
                fetch.waiters[i].startAttempt(at: now &+ UInt64(delay))
            } else {
                fetch.waiters.remove(at: i)
                waiting[waiter.task.token] = nil
                failed.append((waiter, error))
            }
        }
        for (waiter, error) in failed.reversed() { waiter.handle.finish(.failure(error)) }
        leftBehind(fetch)
    }

    /// Keeps what a cut attempt received when the rest can be asked for: a
    /// `200` (or the `206` of a resumed attempt) that says `Accept-Ranges:
    /// bytes` (resources.md). Its validator, when it has one (an ETag, else
    /// Last-Modified), goes in `If-Range`, so a changed file is sent whole;
    /// without one the `206`'s `Content-Range` must still start where the kept bytes end.
    private func keepForResume(_ fetch: Fetch, _ partial: HTTPResponse?) {
        if let earlier = fetch.resume {
            // A resumed attempt that failed. Without bytes to show (a timeout), the kept
            // ones stay: the next attempt writes right after them, whatever this one wrote.
            guard let partial, partial.bodyBytes > 0 else { return }
            if partial.status == 206, partial.header("content-range")?.hasPrefix("bytes \(earlier.count)-") == true,
               earlier.count + partial.bodyBytes <= manager.settings.maxBytes {
                fetch.resume = (earlier.headers, earlier.bytes + partial.body, earlier.count + partial.bodyBytes, earlier.validator)
            } else {
                // Anything else (a whole body again, another offset) is not the rest of
                // the kept bytes: the next attempt starts over.
                fetch.resume = nil
            }
            return
        }
        guard let partial, partial.bodyBytes > 0 else { return }
        guard partial.status == 200, partial.header("accept-ranges")?.lowercased().contains("bytes") == true,
              partial.bodyBytes <= manager.settings.maxBytes else { return }
        fetch.resume = (partial.headers, partial.body, partial.bodyBytes, partial.header("etag") ?? partial.header("last-modified"))
    }

    /// `304`: the copy is still good; its bytes stay, `storedAt` is renewed.
    private func revalidated(_ fetch: Fetch, _ previous: ResourceRecord, _ response: HTTPResponse) {
        if let etag = response.header("etag"), let kept = previous.etag,
           ResourceExecutor.opaqueTag(etag) != ResourceExecutor.opaqueTag(kept) {
            // A 304 naming another entity tag does not vouch for these bytes (RFC 9111 §4.3.4):
            // adopting its tag would keep them for good. Fetched whole instead.
            fetch.previous = nil
            attempt(fetch)
            return
        }
        guard case .content(let content) = manager.load(previous) else {
            // The copy went meanwhile: fetch it whole.
            fetch.previous = nil
            attempt(fetch)
            return
        }
        var record = previous
        let now = Date().timeIntervalSince1970
        record.storedAt = now
        record.lastUsedAt = now
        if let etag = response.header("etag") { record.etag = etag }
        if let modified = response.header("last-modified") { record.lastModified = modified }
        manager.statistics.countRevalidated()
        // The renewed entry (a new `storedAt`) is a replacement too: a removal that chose
        // the copy before it must not unlink the file the renewed entry stands for.
        manager.replacements.begin(fetch.key)
        commit(fetch, record, content: content, source: "revalidated", replacing: true)
    }

    /// A body judged a success: remade when the jobs name a remaker, checked
    /// against their `sha256`s, written at rest with its cipher and indexed. Hashing,
    /// remaking, compressing, sealing and writing run on the thread pool
    /// (``EventLoop/offload(_:then:)``), never on this loop.
    private func store(_ fetch: Fetch, _ response: HTTPResponse) {
        var meta = Meta(type: response.header("content-type"), etag: response.header("etag"),
                        modified: response.header("last-modified"), status: response.status)
        if fetch.remaker == "gunzip", let type = meta.type, ResourceExecutor.isGzipType(type) {
            meta.type = "application/octet-stream"  // the content is no longer gzip; what it is, nobody said
        }
        if fetch.streams && !response.isSpooled {
            keepStreamed(fetch, response.bodyBytes, meta)
            return
        }
        // A body in memory: remade, sealed, or a plain one spooled whole (an earlier
        // attempt's file, if any, is not used). Written in one piece on the pool.
        fetch.discardFile()
        var remake: (name: String, remaker: ResourceManager.Remaker, options: JSONValue)?
        if let name = fetch.remaker {
            guard let remaker = manager.remaker(named: name) else {
                fail(fetch, JobError(.invalid, "remaker: unknown remaker '\(name)'"))
                return
            }
            remake = (name, remaker, fetch.remakeOptions ?? .object([:]))
        }
        // A copy is every job's of its URL, whatever credentials each sends: the
        // ones this request sent, echoed back, are masked before it is kept.
        let credentials = Self.credentials(of: fetch)
        let body = credentials.isEmpty ? response.body : SecretMasking.masked(response.body, secrets: credentials)
        let work = CopyWriter(manager: manager, components: manager.components(of: fetch.key), body: body,
                            remake: remake, cipher: fetch.cipher, accepted: fetch.acceptedDigests)
        manager.replacements.begin(fetch.key)  // the writer renames its file into place on the pool
        // A remaker may take long (an embedder's code, or one that replaced
        // `gunzip`): it runs on this worker's own threads (resources.md §5, the
        // worker's blocking pool), so it never holds up the process's thread
        // pool, where every other copy is written.
        let written = { [self] (result: Result<CopyWriter.Copy, JobError>) in
            switch result {
            case .success(let copy):
                // The file is in place: it is indexed even when no job waits any
                // more (cancelled meanwhile), so the file and the index agree.
                let now = Date().timeIntervalSince1970
                // The index keeps the clear content's digest, but for an aes-gcm copy the
                // sealed file's: nothing derived from its clear bytes is stored.
                let record = ResourceRecord(
                    key: fetch.key, url: fetch.shownURL, bytes: copy.content.count, diskBytes: copy.diskBytes,
                    contentType: meta.type, sha256: copy.sha256, etag: meta.etag, lastModified: meta.modified,
                    storedAt: now, lastUsedAt: now, cipher: work.cipher, status: meta.status, fileID: copy.fileID)
                self.commit(fetch, record, content: copy.content, source: "network", replacing: true)
            case .failure(let error):
                self.manager.replacements.end(fetch.key, committed: nil)
                guard self.stillWanted(fetch) else { return }
                self.fail(fetch, error)
            }
        }
        if remake != nil {
            loop.offload(to: remakePool, { work.run() }, then: written)
        } else {
            loop.offload({ work.run() }, then: written)
        }
    }

    /// A plain copy streamed to its temporary file: on the thread pool its
    /// digest taken and its bytes read back (only for a memory tier it fits
    /// in, or a job that asked for them with `as`); then,
    /// on this loop, the digest checked and the file put in place and indexed.
    private func keepStreamed(_ fetch: Fetch, _ received: Int, _ meta: Meta) {
        guard let file = fetch.file else {
            fail(fetch, JobError(.internal, "resource: a streamed copy without its file"))
            return
        }
        let wanted = fetch.served.contains { $0.spec.wantsContent }
            || (memory.capacity > 0 && received <= memory.capacity)
        let written = file.written
        // Allocated here, filled on the pool: the bytes the memory tier keeps come
        // from (and go back to) this thread's malloc arena. Allocated on the pool
        // threads, they left 5–7 MiB more resident in the 20,000-resource bench row.
        let readBack = wanted ? ReadBackBuffer(count: received) : nil
        let credentials = Self.credentials(of: fetch)
        loop.offload({ () -> Result<(String, [UInt8], Int), JobError> in
            if !credentials.isEmpty {
                switch ResourceExecutor.holdsAny(of: credentials, written) {
                case .success(false): break
                case .success(true): return .failure(ResourceExecutor.echoedCredentials)
                case .failure(let error): return .failure(error)
                }
            }
            return ResourceExecutor.digest(written, readingBackInto: readBack)
        }) { [self] result in
            guard self.stillWanted(fetch) else { return }
            let digest: String, content: [UInt8], size: Int
            switch result {
            case .success(let read): (digest, content, size) = read
            case .failure(let error):
                self.fail(fetch, error)
                return
            }
            if let accepted = fetch.acceptedDigests, !accepted.contains(digest) {
                self.fail(fetch, CopyWriter.mismatch(digest, accepted, cipher: fetch.cipher))
                return
            }
            self.manager.replacements.begin(fetch.key)
            let fileID = file.fileID
            do throws(JobError) {
                try file.commit()
            } catch {
                self.manager.replacements.end(fetch.key, committed: nil)
                self.fail(fetch, error)
                return
            }
            fetch.file = nil
            let now = Date().timeIntervalSince1970
            let record = ResourceRecord(
                key: fetch.key, url: fetch.shownURL, bytes: size, diskBytes: size, contentType: meta.type,
                sha256: digest, etag: meta.etag, lastModified: meta.modified, storedAt: now, lastUsedAt: now, cipher: .none,
                status: meta.status, fileID: fileID)
            self.commit(fetch, record, content: content, source: "network", replacing: true)
        }
    }

    /// Whether a fetch whose work comes back from the thread pool still has
    /// jobs to finish. When the executor closed meanwhile they fail as
    /// cancelled; when every job was cancelled the fetch ends quietly. Either
    /// way its temporary file goes.
    private func stillWanted(_ fetch: Fetch) -> Bool {
        if closed {
            finishAll(fetch) { $0.handle.finish(.failure(JobError(.cancelled, "cancelled"))) }
            return false
        }
        guard !fetch.waiters.isEmpty else {
            // `cancel` forgot it already; a newer fetch of the key may be running.
            forget(fetch)
            fetch.discardFile()
            return false
        }
        return true
    }

    /// The credentials `fetch`'s request sent: its route's (headers, URL, proxy) and a session's token.
    private static func credentials(of fetch: Fetch) -> [String] {
        var secrets = fetch.routed.secrets
        if let token = fetch.token, !secrets.contains(token) { secrets.append(token) }
        return secrets
    }

    /// A streamed body that holds the credentials its request sent is not kept:
    /// masking them would mean writing it again, and it is no copy to share.
    static let echoedCredentials = JobError(
        .invalid, "the response holds the credentials the request sent (echoed back): a resource is every job's of its URL, so it is not kept")

    /// Whether the streamed copy holds any of `secrets` (an occurrence across
    /// two pieces included). Runs on the thread pool.
    private static func holdsAny(of secrets: [String], _ file: StateFileContents) -> Result<Bool, JobError> {
        let overlap = max(0, (secrets.map(\.utf8.count).max() ?? 0) - 1)
        var carry: [UInt8] = []
        var found = false
        do throws(JobError) {
            try file.forEachPiece { piece in
                guard !found else { return }
                let window = carry + piece
                found = SecretMasking.masked(window, secrets: secrets) != window
                carry = Array(window.suffix(overlap))
            }
        } catch {
            return .failure(error)
        }
        return .success(found)
    }

    /// The SHA-256 of a streamed copy, its bytes when `buffer` is given (read
    /// back into it), and its size (what is on disk is what gets indexed).
    /// Runs on the thread pool.
    private static func digest(_ file: StateFileContents, readingBackInto buffer: ReadBackBuffer?) -> Result<(String, [UInt8], Int), JobError> {
        do throws(JobError) {
            if let buffer {
                var bytes = buffer.take()
                try file.read(into: &bytes)
                return .success((ResourceKey.sha256(bytes), bytes, bytes.count))
            }
            var hash = SHA256()
            var size = 0
            try file.forEachPiece { piece in
                hash.update(data: piece)
                size += piece.count
            }
            return .success((Hex.string(hash.finalize()), [], size))
        } catch {
            return .failure(error)
        }
    }

    /// Whether a `206`'s `Content-Range` (`bytes START-END/TOTAL`, TOTAL maybe
    /// `*`) is the rest of a body of which `kept` bytes are here: it starts at
    /// `kept`, `received` bytes came for it, and it ends where the body does.
    /// Peers' numbers: parsed without overflow.
    static func completes(_ range: String, from kept: Int, received: Int) -> Bool {
        guard range.hasPrefix("bytes ") else { return false }
        let spec = range.dropFirst(6)
        guard let dash = spec.firstIndex(of: "-"), let slash = spec.firstIndex(of: "/"), dash < slash,
              let start = Int(spec[..<dash]), let end = Int(spec[spec.index(after: dash)..<slash]) else { return false }
        let total = spec[spec.index(after: slash)...]
        let (length, overflow) = end.subtractingReportingOverflow(start)
        guard start == kept, !overflow, length >= 0, length < Int.max, length + 1 == received else { return false }
        return total == "*" || Int(total) == end.addingReportingOverflow(1).partialValue && end < Int.max
    }

    /// Why a `206` is not the rest of the version the kept bytes are from, or
    /// nil: its ETag differs from the one `If-Range` named (a server that
    /// ignores `If-Range`), or its total length from the first answer's
    /// `Content-Length` (`first`: that answer's headers).
    static func otherVersion(_ response: HTTPResponse, range: String, resuming first: HTTPHeaderBlock,
                             validator: String?) -> String? {
        if let validator, validator.hasPrefix("\"") || validator.hasPrefix("W/"), let tag = response.header("etag"),
           opaqueTag(tag) != opaqueTag(validator) {
            return "the server's resumed range is of another version (ETag \(tag), the kept bytes' \(validator)): fetched again whole"
        }
        if first.first("content-encoding") == nil, let declared = first.first("content-length").flatMap({ Int($0) }),
           let slash = range.lastIndex(of: "/"), let total = Int(range[range.index(after: slash)...]), total != declared {
            return "the server's resumed range ends a body of \(total) bytes, the first answer's was \(declared): fetched again whole"
        }
        return nil
    }

    /// An entity tag without its weakness mark: a server may answer a strong tag weak after compressing.
    static func opaqueTag(_ tag: String) -> Substring {
        let trimmed = tag.drop { $0 == " " }
        return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
    }

    /// Commits the index entry, then (back on this loop) keeps the content in
    /// memory and finishes every waiter: a job never reports a copy the index does not know.
    /// `replacing`: a new file was renamed into place for it (``ReplacementWatch/begin()``
    /// was called), and the replacement ends with this commit.
    private func commit(_ fetch: Fetch, _ record: ResourceRecord, content: [UInt8], source: String,
                        replacing: Bool = false) {
        let loop = self.loop
        let finishing = LoopBound({ [weak self] (result: Result<Void, StoreError>) in
            // The index answers on its own thread: the worker may have closed and let go of
            // this executor meanwhile (the copy and its entry agree either way).
            guard let self else { return }
            switch result {
            case .success:
                self.remember(record, content)
                if source == "network" { self.manager.copyStored(diskBytes: record.diskBytes) }
                // A new copy, or one a 304 renewed (its `storedAt` moved).
                self.manager.emit(EventName.resourceStored, ["key": .string(record.key), "url": .string(record.url),
                                                             "bytes": .int(record.bytes), "source": .string(source)])
                self.finishAll(fetch) { self.finish($0, record: record, content: content, source: source) }
            case .failure(let error):
                self.fail(fetch, JobError(.internal, "resource index: \(error)"))
            }
        }, loop: loop)
        let replacements = manager.replacements
        manager.index.storeResource(record) { result in
            if replacing { replacements.end(record.key, committed: (try? result.get()) != nil ? record.storedAt : nil) }
            _ = loop.execute { finishing.value(result) }
        }
    }

    private func fail(_ fetch: Fetch, _ error: JobError) {
        finishAll(fetch, failure: error) { $0.handle.finish(.failure(error)) }
    }

    /// Ends `fetch` (with `failure`, when it failed): `body` finishes each job it
    /// served; the jobs that wait for it to keep a copy of their own start again.
    private func finishAll(_ fetch: Fetch, failure: JobError? = nil, _ body: (Waiter) -> Void) {
        forget(fetch, failure: failure)
        fetch.discardFile()
        let waiters = fetch.waiters
        fetch.waiters = []
        for waiter in waiters {
            waiting[waiter.task.token] = nil
            if waiter.startsAgain {
                begin(waiter.task, handle: waiter.handle, counted: true)
            } else {
                body(waiter)
            }
        }
    }

    // MARK: - Copies

    /// Removes a copy whose file is missing or corrupt (its entry, then its
    /// file, on the chores thread), unless it was replaced meanwhile (see
    /// ``ResourceManager/removeCopies(_:reason:since:done:)``): the entry goes
    /// only while it is this copy, so a later store of the key is never undone.
    private func drop(_ record: ResourceRecord, since generation: Int) {
        memory.remove(record.key)
        manager.removeCopies([record], reason: "corrupt", since: generation) { _ in }
    }

    /// Records a use of `key` (see ``PendingUses``) and hands the uses to the index within a second.
    private func touch(_ key: String, at time: Double) {
        manager.uses.record(key, at: time)
        guard touchTimer == nil else { return }
        touchTimer = loop.schedule(afterMilliseconds: 1000) { [unowned self] in
            self.touchTimer = nil
            self.flushTouches()
        }
    }

    /// Writes the recorded uses (every worker's: whichever loop comes first) to the index.
    private func flushTouches() {
        for (time, keys) in manager.uses.take() {
            manager.index.touchResources(keys, at: time)
        }
    }

    // MARK: - Results

    /// Keeps a copy in the memory tier, with the result of a hit on it built once.
    private func remember(_ record: ResourceRecord, _ content: [UInt8]) {
        // (A streamed copy too large for the tier comes without its bytes.)
        guard memory.capacity > 0, content.count == record.bytes else { return }
        memory.put(record, content: content, result: ResourceResult(record: record, source: "memory", manager: manager).fields)
    }

    /// Finishes `waiter` with the result object (resources.md §1), checking its
    /// own `sha256`; `kept` is the memory tier's entry of a hit, whose result
    /// (`source` included) is shared as it is unless the job asked for the content.
    private func finish(_ waiter: Waiter, record: ResourceRecord, content: [UInt8], source: String,
                        kept: MemoryTier.Entry? = nil) {
        if content.count != record.bytes, waiter.spec.wantsContent {
            // A streamed copy whose bytes were not read back (no job asked for them when the
            // fetch decided): this job joined later and wants them. The copy is in place and
            // indexed by now, so it is served from the repository.
            start(waiter.task, handle: waiter.handle)
            return
        }
        if !waiter.expects(record.status) {
            // A job that joined a transfer whose first job expects other statuses.
            waiter.handle.finish(.failure(JobError(.http, "HTTP \(record.status)", status: record.status)))
            return
        }
        if let expected = waiter.spec.sha256 {
            let digest = ResourceManager.contentDigest(record, content)
            if expected != digest {
                waiter.handle.finish(.failure(CopyWriter.mismatch(digest, [expected], cipher: record.cipher)))
                return
            }
        }
        if record.cipher == .aesGCM, waiter.spec.wantsContent {
            // Never reached (a copy kept another way is a miss; `as` with aes-gcm is refused at submit):
            // the last guard before clear content could land in a result.
            waiter.handle.finish(.failure(JobError(.internal, "as: an aes-gcm copy's content is never put in a result")))
            return
        }
        var o: OrderedDictionary<String, JSONValue>
        let withoutContent = !waiter.spec.wantsContent
        if let kept {
            if withoutContent {
                waiter.handle.succeed(building: kept.result)
                return
            }
            o = kept.fields
        } else {
            let result = ResourceResult(record: record, source: source, manager: manager)
            if withoutContent {
                waiter.handle.succeed(building: result)
                return
            }
            o = result.fields
        }
        let content = waiter.secrets.isEmpty ? content : SecretMasking.masked(content, secrets: waiter.secrets)
        switch waiter.spec.presentation {
        case .text?:
            guard let text = UTF8Text.string(validating: content) else {
                waiter.handle.finish(.failure(JobError(.decode, "as: the content is not UTF-8 text")))
                return
            }
            o["content"] = .string(text)
        case .json?:
            do {
                o["content"] = try JSONParser.parse(content)
            } catch {
                waiter.handle.finish(.failure(JobError(.decode, "as: the content is not JSON: \(error)")))
                return
            }
        case .base64?: o["content"] = .string(Data(content).base64EncodedString())
        case .path?, nil: break
        }
        waiter.handle.finish(.success(.object(o)))
    }

    /// The stat fields of a copy (a result without `source` and `content`).
    static func stat(_ record: ResourceRecord, path: String) -> OrderedDictionary<String, JSONValue> {
        var o: OrderedDictionary<String, JSONValue> = ["key": .string(record.key), "url": .string(record.url)]
        if record.cipher == .none { o["path"] = .string(path) }
        o["bytes"] = .int(record.bytes)
        if let type = record.contentType { o["contentType"] = .string(type) }
        o["sha256"] = .string(record.sha256)
        if let etag = record.etag { o["etag"] = .string(etag) }
        o["storedAt"] = .string(HydraEvent.format(record.storedAt))
        return o
    }
}

extension ResourceSpec {
    /// Whether the job's result carries the content (`as` text, json or
    /// base64), not only the copy's fields (`as` absent or `path`).
    var wantsContent: Bool { presentation != nil && presentation != .path }
}
