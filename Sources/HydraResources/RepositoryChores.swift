import HydraLoop

/// The thread the repository's chores run on, off every worker loop:
/// removals and purges (asked for, or every `resources.purgeIntervalSec`).
///
/// Why a thread of its own (a libuv loop) rather than global dispatch queues:
/// a chore does blocking file I/O and waits for the index to commit a
/// removal before it deletes files, and a blocking wait belongs on a thread
/// made for it. Chores run one at a time in the order asked, so two purges
/// never race over the same files. Thread-safe.
final class RepositoryChores: @unchecked Sendable {
    private let loop = EventLoop(name: "hydra-resources")
    /// The next upkeep round. Loop thread only.
    @exclusivity(unchecked) private var next: ScheduledTask?
    /// Set when the loop shuts down: no round is scheduled after. Loop thread only.
    @exclusivity(unchecked) private var stopped = false

    init() {
        loop.execute { [self] in
            // A pending timer would keep the loop (and so `shutdown()`) waiting for it.
            loop.onShutdown { [self] in
                stopped = true
                next?.cancel()
                next = nil
            }
        }
    }

    /// Runs `chore` on the chores thread. After ``shutdown()`` it runs on the
    /// caller's thread instead, so an answer is never lost.
    func run(_ chore: @escaping @Sendable () -> Void) {
        if !loop.execute(chore) { chore() }
    }

    /// Runs `round` every `seconds` until ``shutdown()``: each round calls
    /// its argument when it is done, and the next one is timed from then.
    func every(seconds: Int, _ round: @escaping @Sendable (_ done: @escaping @Sendable () -> Void) -> Void) {
        loop.execute { [self] in
            guard !stopped else { return }
            next = loop.schedule(afterMilliseconds: UInt64(max(1, seconds)) * 1000) { [self] in
                next = nil
                round { self.every(seconds: seconds, round) }
            }
        }
    }

    /// True on the chores thread (where ``shutdown()`` must not be called).
    var isCurrentThread: Bool { loop.inEventLoop }

    /// Stops the timer and the thread once the chores already asked for are done.
    func shutdown() { loop.shutdown() }
}
