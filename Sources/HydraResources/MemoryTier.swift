import HydraCore
import OrderedCollections

/// The memory tier of the repository: an LRU of content by bytes
/// (`resources.memoryBytes`; 0 keeps nothing). One per remote worker, owned by
/// its loop thread (loop-confined, like the executor that holds it), so a hit
/// never crosses threads.
///
/// A hit, a store and an eviction cost the same whatever the number of copies
/// held: a dictionary finds the entry and a doubly linked list keeps the order
/// of use (moving an entry in an ordered dictionary shifts every later one).
final class MemoryTier {
    /// A copy held, shared by reference with every hit (immutable).
    final class Entry {
        let record: ResourceRecord
        let content: [UInt8]
        /// The result of a hit (the stat fields and `source: memory`), built
        /// once when the copy is kept, its encoded length counted once too (the
        /// coordinator checks every result against `limits.maxResultBytes`):
        /// a hit shares it, it does not copy it.
        let result: KeptResult
        /// The same fields, for a hit that adds the content (`as`).
        let fields: OrderedDictionary<String, JSONValue>

        init(record: ResourceRecord, content: [UInt8], fields: OrderedDictionary<String, JSONValue>) {
            self.record = record
            self.content = content
            self.fields = fields
            result = KeptResult(fields)
        }
    }

    /// One entry in the list of use. Ownership: `nodes` holds the only strong
    /// reference to each node; the links are unowned and a node is unlinked
    /// before `nodes` lets it go, so no link outlives its node (and dropping
    /// a long list never recurses through strong links).
    private final class Node {
        let key: String
        let entry: Entry
        @exclusivity(unchecked) unowned(unsafe) var older: Node?
        @exclusivity(unchecked) unowned(unsafe) var newer: Node?

        init(key: String, entry: Entry) {
            self.key = key
            self.entry = entry
        }
    }

    let capacity: Int
    @exclusivity(unchecked) private(set) var bytes = 0 {
        didSet { account(bytes - oldValue) }
    }
    /// Reports each change of ``bytes`` (to the manager's count of every tier's).
    private let account: (Int) -> Void
    @exclusivity(unchecked) private var nodes: [DigestKey: Node] = [:]
    /// The least and the most recently used ends of the list.
    @exclusivity(unchecked) private unowned(unsafe) var oldest: Node?
    @exclusivity(unchecked) private unowned(unsafe) var newest: Node?

    init(capacity: Int, account: @escaping (Int) -> Void) {
        self.capacity = capacity
        self.account = account
    }

    /// The number of copies held.
    var count: Int { nodes.count }

    /// The entry for `key`, now the most recently used.
    func get(_ key: String) -> Entry? {
        guard let node = nodes[DigestKey(key)] else { return nil }
        if node !== newest {
            unlink(node)
            append(node)
        }
        return node.entry
    }

    /// Keeps `content` under `record.key`, evicting the least recently used past the capacity.
    func put(_ record: ResourceRecord, content: [UInt8], result: OrderedDictionary<String, JSONValue>) {
        remove(record.key)
        guard content.count <= capacity else { return }
        let node = Node(key: record.key, entry: Entry(record: record, content: content, fields: result))
        nodes[DigestKey(record.key)] = node
        append(node)
        bytes += content.count
        while bytes > capacity, let first = oldest { remove(first.key) }
    }

    func remove(_ key: String) {
        guard let node = nodes.removeValue(forKey: DigestKey(key)) else { return }
        unlink(node)
        bytes -= node.entry.content.count
    }

    func removeAll() {
        oldest = nil
        newest = nil
        nodes.removeAll()
        bytes = 0
    }

    /// The keys from the least to the most recently used (for tests).
    var keysByUse: [String] {
        var keys: [String] = []
        var node = oldest
        while let current = node {
            keys.append(current.key)
            node = current.newer
        }
        return keys
    }

    private func unlink(_ node: Node) {
        if let older = node.older { older.newer = node.newer } else { oldest = node.newer }
        if let newer = node.newer { newer.older = node.older } else { newest = node.older }
        node.older = nil
        node.newer = nil
    }

    private func append(_ node: Node) {
        node.older = newest
        if let last = newest { last.newer = node } else { oldest = node }
        newest = node
    }

    /// The removal count of the repository this tier last saw: when it moved,
    /// some copy was removed and the tier forgets everything (removals are rare).
    @exclusivity(unchecked) var seenRemovals = 0

    /// Empties the tier when the repository removed copies since it last
    /// looked (`removals`: the manager's count of removals).
    func forget(ifRemovalsMovedTo removals: Int) {
        guard removals != seenRemovals else { return }
        removeAll()
        seenRemovals = removals
    }
}
