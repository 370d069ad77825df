import HydraCore
import HydraLoop

/// Uses of copies that the index's `lastUsedAt` does not show yet.
///
/// A hit records its time here (one uncontended lock, no write); each
/// worker's loop hands the recorded uses to the index about once a second,
/// not per hit. Whatever orders copies by use (a purge, the disk LRU) lays
/// these over the index's times first, so the least recently used copy is
/// the one that goes even right after a hit. Shared by the workers' executors
/// and the chores thread. Thread-safe.
final class PendingUses: Sendable {
    private let uses = Locked<[String: Double]>([:])

    /// Records that `key` was used at `time` (Unix seconds).
    func record(_ key: String, at time: Double) {
        uses.withLock { $0[key] = max($0[key] ?? 0, time) }
    }

    /// The uses recorded so far, forgotten here (for the index).
    func take() -> [String: Double] {
        uses.withLock {
            let taken = $0
            $0.removeAll(keepingCapacity: true)
            return taken
        }
    }

    /// `records` with the uses recorded so far laid over their `lastUsedAt`,
    /// least recently used first (the order ``ResourceIndexStore/resourcesByUse()`` gives).
    func overlaid(_ records: [ResourceRecord]) -> [ResourceRecord] {
        let pending = uses.withLock { $0 }
        guard !pending.isEmpty else { return records }
        return records.map { record in
            guard let used = pending[record.key], used > record.lastUsedAt else { return record }
            var newer = record
            newer.lastUsedAt = used
            return newer
        }.sorted { ($0.lastUsedAt, $0.key) < ($1.lastUsedAt, $1.key) }
    }
}
