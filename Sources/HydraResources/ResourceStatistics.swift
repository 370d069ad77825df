import Synchronization

/// Counters of the resource manager (`resource.stats`, `hydra.stats`). Thread-safe.
public final class ResourceStatistics: Sendable {
    private let memoryHits = Atomic<Int>(0)
    private let diskHits = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)
    private let revalidated = Atomic<Int>(0)
    private let merged = Atomic<Int>(0)
    private let downloads = Atomic<Int>(0)
    private let resumed = Atomic<Int>(0)

    public struct Snapshot: Sendable, Equatable {
        public var memoryHits: Int
        public var diskHits: Int
        public var misses: Int
        public var revalidated: Int
        /// Jobs that joined a transfer of the same key already in flight.
        public var merged: Int
        /// Requests sent (every attempt).
        public var requests: Int
        /// Transfers finished with a `Range` request after a cut (resources.md's Range resume).
        public var resumed: Int
    }

    func countMemoryHit() { memoryHits.add(1, ordering: .relaxed) }
    func countDiskHit() { diskHits.add(1, ordering: .relaxed) }
    func countMiss() { misses.add(1, ordering: .relaxed) }
    func countRevalidated() { revalidated.add(1, ordering: .relaxed) }
    func countMerged() { merged.add(1, ordering: .relaxed) }
    func countRequest() { downloads.add(1, ordering: .relaxed) }
    func countResumed() { resumed.add(1, ordering: .relaxed) }

    public var snapshot: Snapshot {
        Snapshot(memoryHits: memoryHits.load(ordering: .relaxed), diskHits: diskHits.load(ordering: .relaxed),
                 misses: misses.load(ordering: .relaxed), revalidated: revalidated.load(ordering: .relaxed),
                 merged: merged.load(ordering: .relaxed), requests: downloads.load(ordering: .relaxed),
                 resumed: resumed.load(ordering: .relaxed))
    }
}
