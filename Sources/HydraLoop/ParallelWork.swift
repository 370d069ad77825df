import Foundation

/// Data-parallel work on the cores a single thread leaves idle: one large,
/// pure computation split in parts (a 50,000-step group's result written as
/// JSON), the first part on the calling thread and each other on a thread
/// of its own, started for the call and joined before it returns.
///
/// Why threads of their own, not ``BlockingPool`` or GCD: the caller blocks
/// until every part is done, so a part must never wait behind unrelated work
/// queued in a shared pool; starting a thread costs ~30 µs, nothing next to
/// a part worth splitting off (callers split only work of milliseconds).
public enum ParallelWork {
    /// How many parts are worth running at once here: the processors this
    /// process may use, at most `limit`.
    public static func parts(limit: Int) -> Int {
        max(1, min(limit, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// `body(0)`, …, `body(count - 1)`, run at once, in order of index.
    /// `body(0)` runs on the calling thread. Any thread; blocks until all return.
    public static func map<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        guard count > 1 else { return count == 1 ? [body(0)] : [] }
        let results = Locked([T?](repeating: nil, count: count))
        let done = DispatchGroup()
        for index in 1..<count {
            done.enter()
            let thread = Thread {
                let result = body(index)
                results.withLock { $0[index] = result }
                done.leave()
            }
            thread.name = "hydra-parallel"
            // As the store's writer: JSON is written recursively, up to the nesting limit.
            thread.stackSize = 8 << 20
            thread.start()
        }
        let first = body(0)
        done.wait()
        return results.withLock { parts in
            parts[0] = first
            return parts.map { $0! }
        }
    }

    /// `body` over `0..<count`, split in consecutive ranges run at once
    /// (``map(_:_:)``) when `count` is at least twice `minimumPerPart`, else in
    /// one call; the parts' elements joined in order. Throws what the range
    /// holding the lowest failing index threw, as one call over all would.
    public static func inParts<T: Sendable, Failure: Error>(
        _ count: Int, minimumPerPart: Int = 2048,
        _ body: @escaping @Sendable (Range<Int>) throws(Failure) -> [T]
    ) throws(Failure) -> [T] {
        let parts = count >= 2 * minimumPerPart ? self.parts(limit: count / minimumPerPart) : 1
        guard parts > 1 else { return try body(0..<count) }
        let outcomes = map(parts) { part in
            Result { () throws(Failure) -> [T] in try body(count * part / parts..<count * (part + 1) / parts) }
        }
        var joined: [T] = []
        joined.reserveCapacity(count)
        for outcome in outcomes { joined += try outcome.get() }
        return joined
    }
}
