import HydraCore
import OrderedCollections

/// The memory tier of the repository: an LRU of content by bytes
/// (`resources.memoryBytes`; 0 keeps nothing). One per remote worker, owned by
/// its loop thread (loop-confined, like the executor that holds it), so a hit
/// never crosses threads.
final class MemoryTier {
    struct Entry {
        var record: ResourceRecord
        var content: [UInt8]
        /// The result's stat fields, built once (a hit only adds `source`).
        var stat: OrderedDictionary<String, JSONValue>
    }

    let capacity: Int
    private(set) var bytes = 0 {
        didSet { account(bytes - oldValue) }
    }
    /// Reports each change of ``bytes`` (to the manager's count of every tier's).
    private let account: (Int) -> Void
    /// Least recently used first.
    private var entries: OrderedDictionary<String, Entry> = [:]

    init(capacity: Int, account: @escaping (Int) -> Void) {
        self.capacity = capacity
        self.account = account
    }

    /// The entry for `key`, now the most recently used.
    func get(_ key: String) -> Entry? {
        guard let index = entries.index(forKey: key) else { return nil }
        let entry = entries.remove(at: index).value
        entries[key] = entry
        return entry
    }

    /// Keeps `content` under `record.key`, evicting the least recently used past the capacity.
    func put(_ record: ResourceRecord, content: [UInt8], stat: OrderedDictionary<String, JSONValue>) {
        remove(record.key)
        guard content.count <= capacity else { return }
        entries[record.key] = Entry(record: record, content: content, stat: stat)
        bytes += content.count
        while bytes > capacity, let first = entries.keys.first { remove(first) }
    }

    func remove(_ key: String) {
        if let old = entries.removeValue(forKey: key) { bytes -= old.content.count }
    }

    func removeAll() {
        entries.removeAll()
        bytes = 0
    }

    /// The removal count of the repository this tier last saw: when it moved,
    /// some copy was removed and the tier forgets everything (removals are rare).
    var seenRemovals = 0
}
