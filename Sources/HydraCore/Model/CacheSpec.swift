import OrderedCollections

/// Response-cache use of one remote job.
public struct CacheSpec: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable { case use, refresh, bypass, only }
    public var mode: Mode
    public var ttlSec: Int?
    public init(mode: Mode, ttlSec: Int? = nil) {
        self.mode = mode
        self.ttlSec = ttlSec
    }
}
