import HydraLoop
import Foundation
import Synchronization

/// A fixed set of threads for blocking local jobs, so a worker's loop never
/// waits on them. Work runs in submission order as threads free up. Thread-safe.
final class BlockingPool: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var head = 0
        var stopping = false
    }
    private let state = Locked(State())
    private let available = DispatchSemaphore(value: 0)
    private let threadCount: Int

    init(threads: Int, name: String) {
        threadCount = max(1, threads)
        for i in 0..<threadCount {
            let thread = Thread { [self] in self.workLoop() }
            thread.name = "\(name)-\(i)"
            thread.start()
        }
    }

    func run(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.append(work) }
        available.signal()
    }

    /// Lets queued work finish, then ends the threads (does not wait for them).
    func shutdown() {
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

/// A flag one thread sets and others read.
final class CancellationFlag: Sendable {
    /// A flag nobody sets, for jobs that cannot be cancelled midway.
    static let never = CancellationFlag()
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
