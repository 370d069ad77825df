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

    /// `body(0)`, …, `body(count - 1)`, run at once, answers in order of
    /// index. `body(0)` runs on the calling thread. A call made inside a part
    /// (a large group inside a large group) runs its parts one after another
    /// on that thread: threads are started for the outermost call only, so a
    /// request that nests large groups deep cannot make the server start a
    /// thread per level. Any thread; blocks until all return.
    public static func map<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        guard count > 1, !inPart else { return (0..<count).map(body) }
        let part = { @Sendable (index: Int) -> T in
            inPart = true
            defer { inPart = false }
            return body(index)
        }
        let results = Locked([T?](repeating: nil, count: count))
        let done = DispatchGroup()
        for index in 1..<count {
            done.enter()
            let thread = Thread {
                let result = part(index)
                results.withLock { $0[index] = result }
                done.leave()
            }
            thread.name = "hydra-parallel"
            // As the store's writer: JSON is written recursively, up to the nesting limit.
            thread.stackSize = 8 << 20
            thread.start()
        }
        let first = part(0)
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

    /// Whether this thread is running a part now (its thread-local flag).
    private static var inPart: Bool {
        get { Thread.current.threadDictionary[partKey] != nil }
        set { Thread.current.threadDictionary[partKey] = newValue ? true : nil }
    }

    private static let partKey = "hydra.ParallelWork.part"
}
