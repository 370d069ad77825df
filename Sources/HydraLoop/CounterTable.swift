/// Objects keyed by counters this process issues (job keys, task tokens,
/// transfer ids) or other small numbers given out lowest first (file
/// descriptors): a direct-mapped slot array indexed by the key's low bits,
/// with a dictionary for the rare key whose slot is taken.
///
/// Why not just a `Dictionary`: the entries alive at once hold a window of
/// nearly consecutive keys. Indexing by the low bits puts neighbours side by
/// side and needs no hashing; a dictionary hashes every key (SipHash, ~95
/// instructions, and a deletion rehashes its neighbours), and scatters them
/// over its whole storage. With 100,000 finished jobs kept, the
/// coordinator's dictionary lookups were a fifth of its time per job, mostly
/// cache misses; on a remote worker's loop, three dictionaries keyed by
/// counters hashed about twelve times per request. A slot is shared only by
/// keys a full table apart (an entry still alive after `capacity` newer
/// ones); those go to `overflow`, and the table doubles once `overflow`
/// holds an eighth of it.
///
/// Not thread-safe: one thread (a loop) owns each table. Inlinable, so that
/// other modules get it specialized for their value type.
public struct CounterTable<Value: AnyObject> {
    @usableFromInline
    struct Slot {
        @usableFromInline var key: UInt64 = 0
        @usableFromInline var value: Value?
        @inlinable init(key: UInt64 = 0, value: Value? = nil) {
            self.key = key
            self.value = value
        }
    }

    @usableFromInline var slots: [Slot]
    @usableFromInline var mask: Int
    @usableFromInline var overflow: [UInt64: Value] = [:]
    @usableFromInline var entries = 0
    /// Entries in the table.
    @inlinable public var count: Int { entries }

    /// A table whose slots cover `capacity` consecutive keys (rounded up to a power of two).
    @inlinable
    public init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        slots = Array(repeating: Slot(), count: size)
        mask = size - 1
    }

    @inlinable public var isEmpty: Bool { entries == 0 }

    @inlinable
    public subscript(key: UInt64) -> Value? {
        let slot = slots[Int(truncatingIfNeeded: key) & mask]
        if slot.key == key, let value = slot.value { return value }
        return overflow.isEmpty ? nil : overflow[key]
    }

    /// Adds or replaces the entry for `key`.
    @inlinable
    public mutating func insert(_ value: Value, forKey key: UInt64) {
        let i = Int(truncatingIfNeeded: key) & mask
        if slots[i].value == nil || slots[i].key == key {
            if slots[i].value == nil {
                entries += 1
                // The key may wait in `overflow` from when its slot was taken.
                if !overflow.isEmpty, overflow.removeValue(forKey: key) != nil { entries -= 1 }
            }
            slots[i] = Slot(key: key, value: value)
            return
        }
        if overflow.updateValue(value, forKey: key) == nil { entries += 1 }
        if overflow.count > slots.count / 8 { grow() }
    }

    /// Removes and returns the entry for `key`, if any.
    @inlinable @discardableResult
    public mutating func removeValue(forKey key: UInt64) -> Value? {
        let i = Int(truncatingIfNeeded: key) & mask
        if slots[i].key == key, let value = slots[i].value {
            slots[i].value = nil
            entries -= 1
            return value
        }
        guard !overflow.isEmpty, let value = overflow.removeValue(forKey: key) else { return nil }
        entries -= 1
        return value
    }

    /// Removes every entry, keeping the slots.
    @inlinable
    public mutating func removeAll() {
        for i in slots.indices { slots[i].value = nil }
        overflow.removeAll()
        entries = 0
    }

    /// Every entry, in no particular order.
    @inlinable
    public var allValues: [Value] {
        var all: [Value] = []
        all.reserveCapacity(entries)
        for slot in slots { if let value = slot.value { all.append(value) } }
        all.append(contentsOf: overflow.values)
        return all
    }

    /// Inlinable like the rest: compiled once generically, it reached `insert`
    /// through the runtime's metadata, ~900 instructions an entry (a table of
    /// 250,000 slots grew in ~50 ms on the coordinator's loop).
    @inlinable
    mutating func grow() {
        var bigger = CounterTable(capacity: slots.count * 2)
        for slot in slots { if let value = slot.value { bigger.insert(value, forKey: slot.key) } }
        for (key, value) in overflow { bigger.insert(value, forKey: key) }
        self = bigger
    }
}
