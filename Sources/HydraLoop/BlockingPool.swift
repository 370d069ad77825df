import Foundation

/// A fixed set of threads for blocking work of one owner (a local worker's
/// `.blocking` jobs, a remote worker's remakers), so neither a worker's loop
/// nor libuv's shared thread pool waits on it. Work runs in submission order
/// as threads free up. Thread-safe.
public final class BlockingPool: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
    }
    private let state = Locked(State())
    private let available = DispatchSemaphore(value: 0)
    private let threadCount: Int

    /// Starts `threads` threads named `name-0`, `name-1`….
    public init(threads: Int, name: String) {
        threadCount = max(1, threads)
        for i in 0..<threadCount {
            let thread = Thread { [self] in self.workLoop() }
            thread.name = "\(name)-\(i)"
            thread.start()
        }
    }

    /// Queues `work` for the next free thread.
    public func run(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.append(work) }
        available.signal()
    }

    /// Lets queued work finish, then ends the threads (does not wait for them).
    public func shutdown() {
        state.withLock { $0.stopping = true }
        for _ in 0..<threadCount { available.signal() }
    }

    private func workLoop() {
        while true {
            available.wait()
            let next: (@Sendable () -> Void)? = state.withLock { s in
                guard s.head < s.queue.count else { return nil }
                let work = s.queue[s.head]
                s.head += 1
                if s.head > 1024 && s.head * 2 > s.queue.count {
                    s.queue.removeFirst(s.head)
                    s.head = 0
                }
                return work
            }
            if let next { next(); continue }
            if state.withLock({ $0.stopping }) { return }
        }
    }
}
