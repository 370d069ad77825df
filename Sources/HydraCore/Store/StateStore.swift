/// Durable state for `hydra serve`, as slices: jobs and steps
/// (``JobStore``), events (``EventStore``), shared data (``SharedDataStore``)
/// the response cache (``ResponseCacheStore``), the resource repository's
/// index (``ResourceIndexStore``) and the auth sessions' sealed tokens
/// (``AuthTokenStore``), plus upkeep.
///
/// The core defines the slices and a higher layer implements them (SQLite
/// today, ``SQLiteStore``; a PostgreSQL backend shared by several nodes is
/// planned), so the scheduler and the RPC server never see a database. Each
/// user takes only the slice it needs, so a new backend plugs in slice by
/// slice and a test fakes one slice. New capabilities add their own slice
/// beside these (schedules) and join it here.
///
/// Threading: every method is thread-safe. Writes are queued to one writer
/// that commits them in batches (group commit); methods taking a `done`
/// callback call it on the writer thread once the write is committed, so a
/// caller that must not answer before the data is durable waits for it, and
/// everyone else fires and forgets. Reads run on the calling thread on a
/// connection of their own and see every write whose `done` already ran.
public protocol StateStore: JobStore, EventStore, SharedDataStore, ResponseCacheStore, ResourceIndexStore, AuthTokenStore {
    /// Deletes finished jobs, their steps and events older than `time`. Fire and forget.
    func prune(before time: Double)

    /// Waits until every queued write is committed.
    func flush()

    /// Calls `done` once every write queued before the call is committed
    /// (on the writer thread; at once, on the caller's, when the store is
    /// closed), without holding a thread meanwhile.
    func afterQueuedWrites(_ done: @escaping @Sendable () -> Void)

    /// Commits what is queued and closes the database. Later calls fail.
    func close()
}
