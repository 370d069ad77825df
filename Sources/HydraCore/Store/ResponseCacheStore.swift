/// The response-cache slice of the state store: responses of apis with a
/// `cacheTTL` (and of jobs with a `cache` spec), by key, with the api they
/// belong to. Threading as for every slice (see ``StateStore``).
public protocol ResponseCacheStore: Sendable {
    /// The cached response for `key` when not older than its TTL, else nil.
    func cachedResponse(_ key: String, now: Double) throws(StoreError) -> JSONValue?

    /// The entry for `key`, fresh or stale (until `prune` removes it); nil if absent.
    func storedResponse(_ key: String) throws(StoreError) -> CachedResponse?

    /// The most recently stored entry whose key starts with `prefix` (taken
    /// literally), with its key; nil if none. `cache.get` finds a URL's
    /// variants with it (`GET URL auth=…`, `GET URL session=NAME`).
    func newestStoredResponse(keyPrefix prefix: String) throws(StoreError) -> (key: String, entry: CachedResponse)?

    /// Stores a response under `key` (with the api it belongs to), fresh for
    /// `ttl` seconds and kept `keep` seconds past that. Fire and forget.
    func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, keep: Double, now: Double)

    /// Removes cached responses by api, key (with its variants for other
    /// credentials and sessions: every `KEY …` key), or key prefix; `done`
    /// receives their keys.
    func removeResponses(api: String?, key: String?, prefix: String?,
                         done: @escaping @Sendable (Result<[String], StoreError>) -> Void)

    /// A random secret of this store, made once and kept with it: the key of
    /// the digest that tells callers with different credentials apart in
    /// cache keys, so that a key shown in an event or by `cache.get` is no
    /// way to check a guessed password offline.
    var credentialKeySecret: [UInt8] { get }
}
