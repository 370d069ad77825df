/// The resource-index slice of the state store: one ``ResourceRecord`` per
/// copy in the resource repository (resources.md §4: the index lives in the
/// state store, so it survives restarts and `kill -9`). The core defines it;
/// SQLite implements it today (``SQLiteStore``), a shared PostgreSQL store can
/// later. Threading as for every slice (see ``StateStore``): reads run on the
/// caller's thread, writes are queued to the store's writer and `done` runs on
/// the writer thread once committed.
public protocol ResourceIndexStore: Sendable {
    /// The entry for `key`, or nil.
    func resource(key: String) throws(StoreError) -> ResourceRecord?

    /// Entries newest first (`storedAt`, then key, descending), whose URL
    /// starts with `urlPrefix` (taken literally) when given, after the entry
    /// keyed `after` (a page's last key) when given, at most `limit`.
    func resources(urlPrefix: String?, after: String?, limit: Int) throws(StoreError) -> [ResourceRecord]

    /// Every entry, least recently used first: what the disk LRU, purge and
    /// startup reconciliation walk.
    func resourcesByUse() throws(StoreError) -> [ResourceRecord]

    /// Inserts or replaces the entry for `record.key`. `done` (if any) runs once committed.
    func storeResource(_ record: ResourceRecord, done: (@Sendable (Result<Void, StoreError>) -> Void)?)

    /// Sets `lastUsedAt` of the entries `keys` to `time`. Fire and forget.
    func touchResources(_ keys: [String], at time: Double)

    /// Deletes the entries `keys`; `done` receives how many existed.
    func removeResources(_ keys: [String], done: @escaping @Sendable (Result<Int, StoreError>) -> Void)

    /// Deletes the entry `key` only while it is the copy stored at `storedAt`
    /// (a newer copy that replaced it stays); `done` receives whether it went.
    func removeResource(_ key: String, ifStoredAt storedAt: Double,
                        done: @escaping @Sendable (Result<Bool, StoreError>) -> Void)
}
