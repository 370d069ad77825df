import DequeModule
import HydraLoop
import Synchronization

/// A worker's counters as its loop last published them (the loop writes, any
/// thread reads; each value is exact, the set may mix two publications), and
/// whether it was asked to pause (written by ``Worker/pause()`` and ``Worker/resume()``).
final class WorkerCounters: Sendable {
    private let paused = Atomic<Bool>(false)
    private let queued = Atomic<Int>(0)
    private let active = Atomic<Int>(0)
    private let done = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    /// The limits in force (set by ``Worker/configure(_:)``, read by anyone).
    let limits: Locked<WorkerLimits>

    init(limits: WorkerLimits) { self.limits = Locked(limits) }

    func setPaused(_ paused: Bool) { self.paused.store(paused, ordering: .relaxed) }

    /// Worker loop only.
    func publish(queued: Int, active: Int, done: Int, failed: Int) {
        self.queued.store(queued, ordering: .relaxed)
        self.active.store(active, ordering: .relaxed)
        self.done.store(done, ordering: .relaxed)
        // Releasing: a reader that sees this store sees the ones before it.
        self.failed.store(failed, ordering: .releasing)
    }

    func snapshot(name: String, kind: JobKind) -> WorkerStats {
        let failed = self.failed.load(ordering: .acquiring)
        return WorkerStats(name: name, kind: kind, paused: paused.load(ordering: .relaxed),
                           queued: queued.load(ordering: .relaxed), active: active.load(ordering: .relaxed),
                           done: done.load(ordering: .relaxed), failed: failed, limits: limits.withLock { $0 })
    }
}
