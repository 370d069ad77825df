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
    private let uses = Locked<[DigestKey: Double]>([:])

    /// Records that `key` was used at `time` (Unix seconds).
    func record(_ key: String, at time: Double) {
        // In place: one lookup of the key, not one to read and one to write.
        func raise(_ latest: inout Double) { if time > latest { latest = time } }
        let key = DigestKey(key)
        uses.withLock { raise(&$0[key, default: 0]) }
    }

    /// The keys used so far, by the time of their last use, forgotten here
    /// (the index is told once per time).
    func take() -> [Double: [String]] {
        let taken = uses.withLock {
            let taken = $0
            $0.removeAll(keepingCapacity: true)
            return taken
        }
        var byTime: [Double: [String]] = [:]
        for (key, time) in taken { byTime[time, default: []].append(key.text) }
        return byTime
    }

    /// `records` with the uses recorded so far laid over their `lastUsedAt`,
    /// least recently used first (the order ``ResourceIndexStore/resourcesByUse()`` gives).
    func overlaid(_ records: [ResourceRecord]) -> [ResourceRecord] {
        let pending = uses.withLock { $0 }
        guard !pending.isEmpty else { return records }
        return records.map { record in
            guard let used = pending[DigestKey(record.key)], used > record.lastUsedAt else { return record }
            var newer = record
            newer.lastUsedAt = used
            return newer
        }.sorted { ($0.lastUsedAt, $0.key) < ($1.lastUsedAt, $1.key) }
    }
}
