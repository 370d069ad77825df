import Synchronization

/// How many bytes of response bodies the ``HTTPClient``s sharing it hold in
/// memory while they receive them, the most they held at once, and how often
/// a transfer waited for room (see ``HTTPPoolOptions/maxBufferedBytes``).
///
/// Written by the clients' loop threads, read by any thread (`hydra.stats`).
public final class HTTPMemoryGauge: Sendable {
    private let held = Atomic<Int>(0)
    private let peak = Atomic<Int>(0)
    private let waits = Atomic<Int>(0)

    public init() {}

    public struct Snapshot: Sendable {
        /// Body bytes held now by transfers in flight.
        public var heldBytes: Int
        /// The most held at once since the start.
        public var peakBytes: Int
        /// Times a transfer was paused until others freed room.
        public var waits: Int
    }

    public var snapshot: Snapshot {
        Snapshot(heldBytes: held.load(ordering: .relaxed), peakBytes: peak.load(ordering: .relaxed),
                 waits: waits.load(ordering: .relaxed))
    }

    func add(_ bytes: Int) {
        let now = held.add(bytes, ordering: .relaxed).newValue
        var seen = peak.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, current) = peak.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = current
        }
    }

    func remove(_ bytes: Int) { held.subtract(bytes, ordering: .relaxed) }

    func countWait() { waits.add(1, ordering: .relaxed) }
}
