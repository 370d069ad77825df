/// Where the REST manager keeps responses of apis with a `cacheTTL` (and of
/// jobs with a `cache` spec). The core defines it; the service layer backs it
/// with the state store. Thread-safe; reads run on the calling worker's loop,
/// so implementations keep them quick (one indexed lookup), writes are queued.
public protocol ResponseCache: Sendable {
    /// The stored entry for `key`, fresh or stale (the caller compares
    /// `expiresAt` with its clock); nil when there is none.
    func storedResponse(_ key: String) -> CachedResponse?
    /// Keeps `value` under `key`, fresh for `ttl` seconds and kept `keep`
    /// seconds longer (for revalidation and stale-if-error answers).
    func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, keep: Double, now: Double)
    /// Forgets every response of `apis` (listed in the `invalidates` of an api
    /// that succeeded). `done` runs, on any thread, once no later
    /// `storedResponse` can return them: the job that made them stale finishes
    /// only then, so a step after it never reads the old response.
    func invalidate(apis: [String], then done: @escaping @Sendable () -> Void)
    /// The key of the digest of a request's credentials in its cache key
    /// (``ResponseCacheStore/credentialKeySecret``); stable for as long as the
    /// cached responses are kept. Empty (the default): an unkeyed SHA-256.
    var keySecret: [UInt8] { get }
}

extension ResponseCache {
    public var keySecret: [UInt8] { [] }
}
