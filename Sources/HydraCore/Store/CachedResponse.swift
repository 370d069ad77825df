/// A response in the cache, fresh or not (rest.md §3): what revalidation,
/// stale-if-error answers and `cache.get` read.
public struct CachedResponse: Sendable, Equatable {
    /// The stored result (status, headers with their `etag`/`last-modified`, body, url).
    public var value: JSONValue
    /// When it was stored or last renewed (seconds since 1970).
    public var storedAt: Double
    /// When it stops being fresh.
    public var expiresAt: Double

    public init(value: JSONValue, storedAt: Double, expiresAt: Double) {
        self.value = value
        self.storedAt = storedAt
        self.expiresAt = expiresAt
    }
}
