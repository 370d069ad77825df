import Synchronization

/// How many submitted jobs are running: a worker started one of their steps
/// (the rest of the unfinished ones are queued). Written on the coordinator
/// loop, read from any thread (`hydra.stats`).
final class RunningJobs: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .relaxed) }
    func add(_ delta: Int) { count.add(delta, ordering: .relaxed) }
}
