import Foundation

/// Durable state for `hydra serve`: jobs, step results, events, idempotency
/// keys, shared data and the response cache.
///
/// The core defines this protocol and a higher layer implements it (SQLite
/// today; a PostgreSQL backend shared by several nodes is planned), so the
/// scheduler and the RPC server never see a database.
///
/// Threading: every method is thread-safe. Writes are queued to one writer
/// that commits them in batches (group commit); methods taking a `done`
/// callback call it on the writer thread once the write is committed, so a
/// caller that must not answer before the data is durable waits for it, and
/// everyone else fires and forgets. Reads run on the calling thread on a
/// connection of their own and see every write whose `done` already ran.
public protocol StateStore: Sendable {
    // MARK: Jobs

    /// Records new jobs (state `queued`) in one transaction. With an
    /// idempotency key already known, that job is not inserted again and the
    /// outcome names the existing job instead.
    func insert(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome], StoreError>) -> Void)

    /// Records that a job started (state `running`, `startedAt`). Fire and forget.
    func markStarted(jobId: String, at time: Double)

    /// Records a job's final state and its `job.result` object (`result`, as
    /// JSON text). `done` runs once committed.
    func finish(jobId: String, state: JobState, result: [UInt8], at time: Double,
                done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// Records one finished step of a graph (its `stepPath`, `"1.0"`), so a
    /// restarted server resumes a graph after its finished steps. `done` runs once committed.
    func recordStep(jobId: String, stepPath: String, outcome: StoredStep,
                    done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// One job, or nil.
    func job(_ jobId: String) throws(StoreError) -> StoredJob?

    /// Jobs newest first, optionally in one state; `after` is the cursor
    /// returned with the previous page. Returns the page and the next cursor
    /// (nil on the last page).
    func jobs(state: JobState?, limit: Int, after cursor: String?) throws(StoreError) -> (jobs: [StoredJob], next: String?)

    /// Jobs not yet final (queued or running), oldest first, with the steps
    /// they already finished and the events they already sent (see
    /// ``EmittedEvents``): what a restarted server must finish.
    func unfinishedJobs() throws(StoreError) -> [(job: StoredJob, steps: [String: StoredStep], emitted: EmittedEvents)]

    // MARK: Events

    /// Appends events (already numbered, in `seq` order). Fire and forget.
    func append(_ events: [HydraEvent])

    /// Appends one event (the journal's case: every event as it is emitted).
    func append(_ event: HydraEvent)

    /// Events with `seq > after`, oldest first, at most `limit`.
    func events(after seq: UInt64, limit: Int) throws(StoreError) -> [HydraEvent]

    /// The highest `seq` ever appended (0 for a new store).
    func lastSeq() throws(StoreError) -> UInt64

    // MARK: Shared data

    /// The value under `key`, decrypted or decompressed; nil if absent.
    func sharedValue(_ key: String) throws(StoreError) -> JSONValue?

    /// Stores `value` under `key`, encoded with `cipher`. `done` runs once committed.
    func setShared(_ key: String, value: JSONValue, cipher: SharedCipher,
                   done: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Removes `key`; `done` receives whether it existed.
    func removeShared(_ key: String, done: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// How the value under `key` is stored; nil if absent. A key keeps its
    /// cipher until told otherwise; an aes-gcm value never appears in clear.
    func sharedCipher(_ key: String) -> SharedCipher?

    // MARK: Response cache

    /// The cached response for `key` when not older than its TTL, else nil.
    func cachedResponse(_ key: String, now: Double) throws(StoreError) -> JSONValue?

    /// Stores a response under `key` (with the api it belongs to) for `ttl` seconds. Fire and forget.
    func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, now: Double)

    /// Removes cached responses by api, key (with its variants for other
    /// credentials, `KEY auth=…`), or key prefix; `done` receives their keys.
    func removeResponses(api: String?, key: String?, prefix: String?,
                         done: @escaping @Sendable (Result<[String], StoreError>) -> Void)

    // MARK: Upkeep

    /// Deletes finished jobs, their steps and events older than `time`. Fire and forget.
    func prune(before time: Double)

    /// Waits until every queued write is committed.
    func flush()

    /// Commits what is queued and closes the database. Later calls fail.
    func close()
}
