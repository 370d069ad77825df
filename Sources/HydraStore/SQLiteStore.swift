import HydraLoop
import Foundation
import HydraCore
import OrderedCollections
import Synchronization

/// The ``StateStore`` on SQLite: one database file, `hydra.db`, in WAL mode.
///
/// Threads: one writer thread owns the write connection and commits every
/// write queued since it last woke in one transaction (group commit), then
/// calls the `done` callbacks on that thread. Reads run on the caller's
/// thread on a second connection behind a lock; WAL lets them run beside the
/// writer, and they see every write whose `done` already ran. Shared values
/// are also kept in memory, so `${shared.KEY}` reads on the coordinator's hot
/// path are a lock and a dictionary lookup. A third connection, on its own
/// thread, copies the WAL into the database file (``Checkpointer``). Every
/// method is thread-safe.
///
/// Call ``close()`` when done: it commits what is queued and stops the threads.
public final class SQLiteStore: StateStore {
    /// SQLite's `synchronous` setting: `normal` survives a process crash,
    /// `full` also a power loss, at one more fsync per commit.
    public enum SyncMode: String, Sendable { case normal, full }

    /// The database file (`directory/hydra.db`).
    public let path: String
    let writer: StoreWriter
    /// Who hears of each batch of events stored (``whenEventsStored(_:)``).
    private let eventObservers: Locked<[@Sendable (UInt64) -> Void]>
    /// The checkpoint thread (internal for tests, which count its runs).
    let checkpointer: Checkpointer
    let reader: ReadConnection
    private let codec: SharedCodec
    private let shared: SharedCache
    /// See ``ResponseCacheStore/credentialKeySecret``: 32 random bytes made by migration 9.
    public let credentialKeySecret: [UInt8]
    /// Throws (naming `HYDRA_SHARED_KEY`) when `passphrase` cannot be a shared
    /// key: checked before opening, so the error is not taken for the folder's.
    public static func checkSharedKey(_ passphrase: String?) throws(StoreError) {
        _ = try SharedCodec(passphrase: passphrase)
    }

    /// Opens (creating the folder and the file when missing) `directory/hydra.db`
    /// and applies the migrations it lacks, then starts the writer thread.
    /// `sharedKey` is the `HYDRA_SHARED_KEY` passphrase for aes-gcm shared
    /// values (16+ characters; nil or empty: none, and aes-gcm values cannot
    /// be written or read). Errors name the file and SQLite's message.
    /// Any thread.
    public init(directory: String, sync: SyncMode = .normal, sharedKey: String? = nil) throws(StoreError) {
        codec = try SharedCodec(passphrase: sharedKey)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError("\(directory): cannot create the state folder: \(error.localizedDescription)")
        }
        path = (directory.hasSuffix("/") ? String(directory.dropLast()) : directory) + "/" + Configuration.State.databaseName
        let writeConnection = try SQLiteConnection(path: path, sync: sync)
        try Migrations.apply(to: writeConnection)
        let readConnection = try SQLiteConnection(path: path, sync: sync, queryOnly: true)
        // Checkpoints run beside the writer, not inside its commits (see `Checkpointer`);
        // a WAL reset after a burst is truncated back to 64 MiB.
        let checkpointer = Checkpointer(connection: try SQLiteConnection(path: path, sync: sync))
        self.checkpointer = checkpointer
        try writeConnection.execute("PRAGMA journal_size_limit=\(64 << 20)")
        writeConnection.replaceAutomaticCheckpoints { frames in checkpointer.walGrew(to: frames) }

        // Every shared value, decoded once. One that cannot be (an aes-gcm
        // value without the right key) keeps its error for whoever reads it:
        // the rest of the store stays usable.
        var entries: [String: SharedCache.Entry] = [:]
        try readConnection.query("SELECT key, cipher, value FROM shared") { [codec] row in
            let key = row.text(0) ?? ""
            guard let cipher = SharedCipher(rawValue: row.text(1) ?? "") else {
                entries[key] = SharedCache.Entry(
                    cipher: .none, value: .failure(StoreError("shared key \"\(key)\" has an unknown cipher in the store")))
                return
            }
            let value = Result { () throws(StoreError) in try codec.decode(row.blob(2), cipher: cipher, key: key) }
            entries[key] = SharedCache.Entry(cipher: cipher, value: value)
        }
        let shared = SharedCache(entries)
        self.shared = shared
        var secret: [UInt8] = []
        try readConnection.query("SELECT value FROM settings WHERE name = 'cacheKeySecret'") { row in secret = row.blob(0) }
        guard secret.count == 32 else { throw StoreError("\(path): the settings table lacks its cacheKeySecret") }
        credentialKeySecret = secret
        reader = ReadConnection(readConnection)
        let observers = Locked<[@Sendable (UInt64) -> Void]>([])
        eventObservers = observers
        writer = try StoreWriter(connection: writeConnection, committed: { operation in
            switch operation {
            case .setShared(let key, _, let cipher, let value, _): shared.set(key, value: value, cipher: cipher)
            case .removeShared(let key, _): shared.remove(key)
            default: break
            }
        }, eventsWritten: { seq in
            for observer in observers.withLock({ $0 }) { observer(seq) }
        })
        writer.start()
        checkpointer.start()
    }

    /// Closes the store if ``close()`` was not called.
    deinit { close() }

    // MARK: - Jobs

    /// Records new jobs in one transaction; a job whose idempotency key is
    /// already known (even from earlier in the same call) is not inserted and
    /// its outcome names the first job. `done` runs on the writer thread once
    /// committed. Any thread; the JSON is encoded on it.
    public func insert(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome], StoreError>) -> Void) {
        writer.enqueue(.insert(jobs.map(EncodedJob.init), done: done))
    }

    /// The jobs the idempotency keys of `jobs` already name (nil: unknown),
    /// through the writer's queue, after the inserts queued before. Writes
    /// nothing. Any thread; `done` on the writer thread.
    public func existing(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome?], StoreError>) -> Void) {
        writer.enqueue(.lookUp(jobs.map(EncodedJob.init), done: done))
    }

    /// Records that a queued job started (state `running`, `startedAt`);
    /// ignored unless the job is still queued. Fire and forget. Any thread.
    public func markStarted(jobId: String, at time: Double) {
        writer.enqueue(.markStarted(jobId: jobId, time: time))
    }

    /// Records a job's final state, its `job.result` object (JSON text) and
    /// `finishedAt`. `done` (optional) runs on the writer thread once
    /// committed. Any thread.
    public func finish(jobId: String, state: JobState, result: [UInt8], at time: Double,
                       done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        writer.enqueue(.finish(jobId: jobId, state: state, result: result, time: time, done: done))
    }

    /// A finish held until the job's final event is appended, then committed in
    /// the same batch (see ``StoreWriter/enqueue(_:withFinalEventOf:stepPath:)``). Any thread.
    public func finish(jobId: String, state: JobState, result: [UInt8], at time: Double, withFinalEvent: Bool,
                       done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        let operation = WriteOperation.finish(jobId: jobId, state: state, result: result, time: time, done: done)
        if withFinalEvent { writer.enqueue(operation, withFinalEventOf: jobId, stepPath: "") } else { writer.enqueue(operation) }
    }

    /// Records (or replaces) one finished step of a graph. `done` (optional)
    /// runs on the writer thread once committed. Any thread.
    public func recordStep(jobId: String, stepPath: String, step: EncodedStep,
                           done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        writer.enqueue(.step(jobId: jobId, stepPath: stepPath, step, done: done))
    }

    /// A step's record held until its final event is appended, as ``finish(jobId:state:result:at:withFinalEvent:done:)``. Any thread.
    public func recordStep(jobId: String, stepPath: String, step: EncodedStep, withFinalEvent: Bool,
                           done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        let operation = WriteOperation.step(jobId: jobId, stepPath: stepPath, step, done: done)
        if withFinalEvent { writer.enqueue(operation, withFinalEventOf: jobId, stepPath: stepPath) } else { writer.enqueue(operation) }
    }

    private static let jobColumns =
        "job_id, spec, input, priority, idempotency_key, state, created_at, started_at, finished_at, result, named_jobs"

    private static func job(from row: SQLRow) throws(StoreError) -> StoredJob {
        let id = row.text(0) ?? ""
        guard let state = JobState(rawValue: row.text(5) ?? "") else {
            throw StoreError("job \(id) has an unknown state in the store")
        }
        return StoredJob(jobId: id, spec: try row.json(1) ?? .null, input: try row.json(2) ?? .null,
                         priority: row.int(3), idempotencyKey: row.text(4), state: state, createdAt: row.double(6),
                         startedAt: row.optionalDouble(7), finishedAt: row.optionalDouble(8), result: try row.json(9),
                         namedJobs: try row.json(10))
    }

    /// The condition of the partial index `jobs_unsucceeded` (migration 7): a
    /// query that filters by another state says it too, so SQLite may use the index.
    static let notSucceeded = "state <> 'succeeded'"

    /// One job, or nil. Caller's thread.
    public func job(_ jobId: String) throws(StoreError) -> StoredJob? {
        try reader.use { db throws(StoreError) in
            var job: StoredJob?
            try db.query("SELECT \(Self.jobColumns) FROM jobs WHERE job_id = ?", [.text(jobId)]) { row throws(StoreError) in
                job = try Self.job(from: row)
            }
            return job
        }
    }

    /// The paths of `jobId`'s recorded steps. Caller's thread.
    public func recordedStepPaths(of jobId: String) throws(StoreError) -> [String] {
        try reader.use { db throws(StoreError) in
            var paths: [String] = []
            try db.query("SELECT step_path FROM steps WHERE job_id = ?", [.text(jobId)]) { row in paths.append(row.text(0) ?? "") }
            return paths
        }
    }

    /// Jobs newest first (`createdAt`, then `jobId`, descending), optionally in
    /// one state, at most `limit`; `after` is the opaque cursor returned with
    /// the previous page (`StoreError` if it is not one). `next` is nil on the
    /// last page. Caller's thread.
    public func jobs(state: JobState?, limit: Int, after cursor: String?) throws(StoreError) -> (jobs: [StoredJob], next: String?) {
        let limit = min(max(limit, 0), 1_000_000)
        var conditions: [String] = []
        var bindings: [SQLValue] = []
        if let state {
            conditions.append("state = ?")
            bindings.append(.text(state.rawValue))
            // Spelled out so the planner may use `jobs_unsucceeded` (a partial
            // index); succeeded jobs are listed from `jobs_by_created`.
            if state != .succeeded { conditions.append(Self.notSucceeded) }
        }
        if let cursor {
            guard let (createdAt, jobId) = JobCursor.decode(cursor) else {
                throw StoreError("after: not a cursor returned by job.list", invalidArgument: "after")
            }
            // A row-value comparison: one range scan of the index.
            conditions.append("(created_at, job_id) < (?, ?)")
            bindings += [.double(createdAt), .text(jobId)]
        }
        let clause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        bindings.append(.int(limit + 1))  // one more than asked tells whether a next page exists
        var page: [StoredJob] = try reader.use { db throws(StoreError) in
            var page: [StoredJob] = []
            try db.query("SELECT \(Self.jobColumns) FROM jobs\(clause) ORDER BY created_at DESC, job_id DESC LIMIT ?",
                         bindings) { row throws(StoreError) in page.append(try Self.job(from: row)) }
            return page
        }
        guard page.count > limit else { return (page, nil) }
        page.removeLast()
        return (page, page.last.map { JobCursor.encode(createdAt: $0.createdAt, jobId: $0.jobId) })
    }

    /// Jobs still queued or running, oldest first, each with the steps it
    /// already finished (by `stepPath`), read in one snapshot. Caller's thread.
    public func unfinishedJobs() throws(StoreError) -> [(job: StoredJob, steps: [String: StoredStep], emitted: EmittedEvents)] {
        let (jobs, steps, emitted) = try reader.snapshot { db throws(StoreError) in
            var jobs: [StoredJob] = []
            try db.query("""
                SELECT \(Self.jobColumns) FROM jobs WHERE state IN ('queued', 'running') AND \(Self.notSucceeded)
                ORDER BY created_at, job_id
                """) { row throws(StoreError) in jobs.append(try Self.job(from: row)) }
            var steps: [String: [String: StoredStep]] = [:]
            try db.query("""
                SELECT s.job_id, s.step_path, s.state, s.result, s.error FROM steps s
                JOIN jobs j ON j.job_id = s.job_id WHERE j.state IN ('queued', 'running') AND j.\(Self.notSucceeded)
                """) { row throws(StoreError) in
                let state = JobState(rawValue: row.text(2) ?? "") ?? .failed
                steps[row.text(0) ?? "", default: [:]][row.text(1) ?? ""] =
                    StoredStep(state: state, result: try row.json(3), error: try row.json(4))
            }
            return (jobs, steps, try Self.emittedEvents(of: Set(jobs.map(\.jobId)), in: db))
        }
        return jobs.map { ($0, steps[$0.jobId] ?? [:], emitted[$0.jobId] ?? EmittedEvents()) }
    }

    /// The events the jobs `roots` already sent, by root job id. Events have no
    /// index by job: they are read from the newest row back, a page of rows
    /// at a time, until every root's own `job.queued` (its first event) was
    /// seen. Unfinished jobs are usually recent, so this reads only the tail;
    /// for a few of them, SQLite passes over the rows that name none.
    private static func emittedEvents(of roots: Set<String>, in db: SQLiteConnection) throws(StoreError)
        -> [String: EmittedEvents]
    {
        var emitted: [String: EmittedEvents] = [:]
        var waiting = roots
        var before = Int.max
        let naming = mentioningAny(roots)
        while !waiting.isEmpty {
            var rows = 0
            var page: [HydraEvent] = []
            try db.query("SELECT first_seq, events FROM event_batches WHERE last_seq < ?\(naming.sql) ORDER BY last_seq DESC LIMIT 256",
                         [.int(before)] + naming.bindings) { row throws(StoreError) in
                rows += 1
                before = row.int(0)
                var batch: [HydraEvent] = []
                try row.jsonLines(1) { line throws(StoreError) in batch.append(try EventBatch.event(line)) }
                page.append(contentsOf: batch.reversed())
            }
            if rows == 0 { break }
            for event in page where roots.contains(event.rootJobId) {
                let root = event.rootJobId, name = event.name, path = event.stepPath
                if name == EventName.retrying {
                    emitted[root, default: EmittedEvents()].insert(stepPath: path, retryingAttempt: event.fields["attempt"]?.intValue ?? 0)
                } else if name == EventName.progress, let round = event.fields["round"]?.intValue, round > 0 {
                    emitted[root, default: EmittedEvents()].insert(stepPath: path, polledRound: round)
                }
                emitted[root, default: EmittedEvents()].insert(stepPath: path, name: name)
                if path.isEmpty && name == EventName.queued { waiting.remove(root) }
            }
        }
        return emitted
    }

    // MARK: - Events

    /// Appends events (already numbered); one whose `seq` is already stored
    /// is ignored. Fire and forget. Any thread; the JSON is encoded on it.
    public func append(_ events: [HydraEvent]) {
        guard !events.isEmpty else { return }
        writer.append(events.compactMap { encoded($0) })
    }

    /// Registers `stored`, called on the writer thread after each batch of events.
    public func whenEventsStored(_ stored: @escaping @Sendable (_ upTo: UInt64) -> Void) {
        eventObservers.withLock { $0.append(stored) }
    }

    /// Appends one event, as ``append(_:)-([HydraEvent])`` does.
    public func append(_ event: HydraEvent) {
        guard let row = encoded(event) else { return }
        writer.append(row)
    }

    /// The event's row, or nil (reported on stderr) when its seq cannot be stored.
    private func encoded(_ event: HydraEvent) -> EncodedEvent? {
        guard Int(exactly: event.seq) != nil else {
            StoreWriter.report("event seq \(event.seq) is beyond SQLite's integers; the event was not stored")
            return nil
        }
        return EncodedEvent(event)
    }

    /// Names (or job ids) a query looks for in a row at most: a longer list
    /// is matched on the decoded events only.
    static let maxQueriedNames = 64

    /// The condition on `event_batches` that a row's text holds one of
    /// `texts` as a JSON string (as an ``EventBatch`` line writes it), and its
    /// bindings; nothing for more than ``maxQueriedNames`` texts (the decoded
    /// events are matched anyway).
    private static func mentioningAny(_ texts: Set<String>) -> (sql: String, bindings: [SQLValue]) {
        guard texts.count <= maxQueriedNames else { return ("", []) }
        let sql = " AND (" + Array(repeating: "instr(events, ?) > 0", count: texts.count).joined(separator: " OR ") + ")"
        return (sql, texts.sorted().map { text in
            var out: [UInt8] = []
            JSONWriter.writeString(text, into: &out)
            return .utf8(out)
        })
    }

    /// Rows read per query by ``events(after:limit:jobId:names:)``.
    static let eventRowsPerPage = 64

    /// Events with `seq > after`, oldest first, at most `limit`, of `jobId`
    /// and `names` when given (see ``EventStore``). Rows that cannot hold a
    /// match (the job's id or no wanted name in their text) are skipped by
    /// SQLite; the rest are decoded and matched here. Caller's thread.
    public func events(after seq: UInt64, limit: Int, jobId: String?, names: Set<String>?) throws(StoreError) -> [HydraEvent] {
        guard let after = Int(exactly: seq), limit > 0 else { return [] }
        if let names, names.isEmpty { return [] }
        let job = jobId.map { Self.mentioningAny([$0]) } ?? (sql: "", bindings: [])
        let named = names.map(Self.mentioningAny) ?? (sql: "", bindings: [])
        let conditions = job.sql + named.sql
        let bindings = job.bindings + named.bindings
        let wanted = min(limit, 1_000_000)
        return try reader.use { db throws(StoreError) in
            var events: [HydraEvent] = []
            var from = after
            while events.count < wanted {
                var rows = 0
                try db.query("""
                    SELECT last_seq, events FROM event_batches WHERE last_seq > ?\(conditions) ORDER BY last_seq LIMIT ?
                    """, [.int(from)] + bindings + [.int(Self.eventRowsPerPage)]) { row throws(StoreError) in
                    rows += 1
                    from = row.int(0)
                    try row.jsonLines(1) { line throws(StoreError) in
                        guard events.count < wanted else { return }
                        let event = try EventBatch.event(line)
                        guard event.seq > after else { return }
                        if let jobId, event.jobId != jobId && event.rootJobId != jobId { return }
                        if let names, !names.contains(event.name) { return }
                        events.append(event)
                    }
                }
                if rows < Self.eventRowsPerPage { break }
            }
            return events
        }
    }

    /// The highest `seq` ever appended (0 for a new store), retention's
    /// prune included. Caller's thread.
    public func lastSeq() throws(StoreError) -> UInt64 {
        try reader.use { db throws(StoreError) in UInt64(clamping: try EventBatch.lastSeq(on: db)) }
    }

    // MARK: - Shared data

    /// The value under `key`, decoded; nil if absent. From memory (no SQL):
    /// a lock and a lookup. Throws, naming `HYDRA_SHARED_KEY`, for an aes-gcm
    /// value when the store has no key or another one. Any thread.
    public func sharedValue(_ key: String) throws(StoreError) -> JSONValue? {
        try shared.value(key)
    }

    /// Stores `value` under `key`, encoded with `cipher` (on the calling
    /// thread). With aes-gcm and no `HYDRA_SHARED_KEY`, `done` gets the
    /// failure at once and nothing is stored. Otherwise `done` runs on the
    /// writer thread once committed, after the in-memory value was updated.
    public func setShared(_ key: String, value: JSONValue, cipher: SharedCipher,
                          done: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let bytes: [UInt8]
        do throws(StoreError) {
            bytes = try codec.encode(value, cipher: cipher)
        } catch {
            done(.failure(error))
            return
        }
        writer.enqueue(.setShared(key: key, bytes: bytes, cipher: cipher, value: value, done: done))
    }

    /// Removes `key`; `done` receives whether it existed, on the writer
    /// thread once committed. Any thread.
    public func removeShared(_ key: String, done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        writer.enqueue(.removeShared(key: key, done: done))
    }

    /// How the value under `key` is stored; nil if absent. From memory. Any thread.
    public func sharedCipher(_ key: String) -> SharedCipher? {
        shared.cipher(key)
    }

    /// Throws, naming `HYDRA_SHARED_KEY` (field `cipher`), when `cipher` is
    /// aes-gcm and the store has no key. Any thread.
    public func checkCipher(_ cipher: SharedCipher) throws(StoreError) {
        try codec.check(cipher)
    }

    // MARK: - Response cache

    /// The response cached under `key` if `storedAt + ttl > now`, else nil.
    /// Caller's thread.
    public func cachedResponse(_ key: String, now: Double) throws(StoreError) -> JSONValue? {
        try reader.use { db throws(StoreError) in
            var value: JSONValue?
            try db.query("SELECT value FROM cache WHERE key = ? AND stored_at + ttl > ?",
                         [.text(key), .double(now)]) { row throws(StoreError) in value = try row.json(0) }
            return value
        }
        // Expired rows stay until `prune`: a read never writes.
    }

    /// The entry under `key`, fresh or not, until `prune` removes it. Caller's thread.
    public func storedResponse(_ key: String) throws(StoreError) -> CachedResponse? {
        try reader.use { db throws(StoreError) in
            var entry: CachedResponse?
            try db.query("SELECT value, stored_at, ttl FROM cache WHERE key = ?", [.text(key)]) { row throws(StoreError) in
                entry = CachedResponse(value: try row.json(0) ?? .null, storedAt: row.double(1), expiresAt: row.double(1) + row.double(2))
            }
            return entry
        }
    }

    /// The newest entry (by `stored_at`) whose key starts with `prefix`, with
    /// its key. A range over the key's index (`prefix` ≤ key < `prefix` with
    /// its last byte raised by one: SQLite compares text bytewise), not a scan. Caller's thread.
    public func newestStoredResponse(keyPrefix prefix: String) throws(StoreError) -> (key: String, entry: CachedResponse)? {
        var upper = Array(prefix.utf8)
        guard let last = upper.last, last < 0x7F else {
            throw StoreError("a cache key prefix must end with an ASCII character", invalidArgument: "keyPrefix")
        }
        upper[upper.count - 1] = last + 1
        return try reader.use { db throws(StoreError) in
            var found: (key: String, entry: CachedResponse)?
            try db.query("""
                SELECT key, value, stored_at, ttl FROM cache WHERE key >= ? AND key < ?
                ORDER BY stored_at DESC LIMIT 1
                """, [.text(prefix), .text(String(decoding: upper, as: UTF8.self))]) { row throws(StoreError) in
                found = (row.text(0) ?? "", CachedResponse(value: try row.json(1) ?? .null, storedAt: row.double(2),
                                                           expiresAt: row.double(2) + row.double(3)))
            }
            return found
        }
    }

    /// Stores (or replaces) a response under `key`, with the api it belongs
    /// to, fresh for `ttl` seconds from `now` and kept `keep` seconds past
    /// that (for revalidation and stale-if-error). Fire and forget. Any thread.
    public func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, keep: Double = 0, now: Double) {
        writer.enqueue(.storeResponse(key: key, api: api, value: value, ttl: ttl, keep: keep, now: now))
    }

    /// Removes cached responses matching every criterion given (api, key with
    /// its variants `KEY …`: `auth=…`, `session=NAME`; key prefix taken literally); none
    /// given removes all. `done` receives their keys, on the writer thread once
    /// committed. Any thread.
    public func removeResponses(api: String?, key: String?, prefix: String?,
                                done: @escaping @Sendable (Result<[String], StoreError>) -> Void) {
        writer.enqueue(.removeResponses(api: api, key: key, prefix: prefix, done: done))
    }

    // MARK: - Upkeep

    /// Deletes final jobs (and their steps) finished before `time`, events
    /// older than `time` (but the newest, so `seq` never goes back) and
    /// expired cached responses. Fire and forget. Any thread.
    public func prune(before time: Double) {
        writer.enqueue(.prune(before: time))
    }

    /// Limits the database to `pages` pages (see ``StoreWriter/limitPages(to:)``): tests fill the store with it.
    func limitPages(to pages: Int) { writer.limitPages(to: pages) }

    /// Returns once every write queued before the call is committed. Any
    /// thread (from a `done` callback, commits the queue right there).
    public func flush() {
        writer.flush()
    }

    /// Calls `done` on the writer thread once every write queued before the
    /// call is committed (or failed; at once when the store is closed).
    public func afterQueuedWrites(_ done: @escaping @Sendable () -> Void) {
        writer.enqueue(.barrier(reached: done))
    }

    /// Commits what is queued, stops the writer thread and closes both
    /// connections. Later writes fail (their `done` gets "store is closed"
    /// at once) and reads throw it. Any thread; idempotent.
    public func close() {
        writer.close()
        checkpointer.close()
        reader.close()
        shared.close()
    }
}
