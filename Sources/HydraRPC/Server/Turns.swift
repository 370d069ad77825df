import DequeModule

/// Runs work at most `limit` at a time, the rest in arrival order as earlier
/// work ends. RPC loop thread only (no lock: it lives in a session).
final class Turns {
    private let limit: Int
    private var running = 0
    private var waiting = Deque<(@escaping () -> Void) -> Void>()

    init(limit: Int) { self.limit = limit }

    /// Runs `work` now, or once a turn frees. `work` gets the call that ends
    /// its turn, which it must make exactly once (when its result is in).
    func run(_ work: @escaping (_ release: @escaping () -> Void) -> Void) {
        guard running < limit else {
            waiting.append(work)
            return
        }
        running += 1
        var released = false
        work { [self] in
            guard !released else { return }
            released = true
            running -= 1
            if let next = waiting.popFirst() { run(next) }
        }
    }
}
