import OrderedCollections

/// Response-cache use of one remote job.
public struct CacheSpec: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable { case use, refresh, bypass, only }
    public var mode: Mode
    public var ttlSec: Int?
    /// `"ttlSec": "http"` (rest.md §3): the lifetime comes from the response's `Cache-Control`/`Expires`.
    public var ttlFromHTTP = false
    /// `staleIfErrorSec` (rest.md §3): how long past its lifetime a stored response may answer when every attempt failed.
    public var staleIfErrorSec: Int?
    public init(mode: Mode, ttlSec: Int? = nil, ttlFromHTTP: Bool = false, staleIfErrorSec: Int? = nil) {
        self.mode = mode
        self.ttlSec = ttlSec
        self.ttlFromHTTP = ttlFromHTTP
        self.staleIfErrorSec = staleIfErrorSec
    }

    /// Reads a lifetime member that is a number of seconds or `"http"`: (seconds, fromHTTP).
    public static func lifetime(_ r: inout FieldReader, _ key: String) throws(ValidationError) -> (Int?, Bool) {
        if case .string(let text)? = r.members[key] {
            _ = r.value(key)
            guard text == "http" else { throw ValidationError(path: r.path(key), "expected seconds or \"http\"") }
            return (nil, true)
        }
        return (try r.int(key, in: SpecBounds.lifetimeSec), false)
    }
}
