/// The coordinator's jobs by integer key: a direct-mapped slot array indexed
/// by the key's low bits, with a dictionary for the rare key whose slot is
/// taken.
///
/// Why not just a `Dictionary`: keys are counters this process issues, so the
/// jobs alive at once hold a window of nearly consecutive keys. Indexing by
/// the low bits puts neighbours side by side and needs no hashing; a
/// dictionary scatters them over its whole storage, and with 100,000 finished
/// jobs kept its lookups were a fifth of the coordinator's time per job,
/// mostly cache misses. A slot is shared only by keys a full table apart (a
/// job still alive after `capacity` newer ones); those go to `overflow`, and
/// the table doubles once `overflow` holds an eighth of it.
///
/// Not thread-safe: the coordinator loop owns it.
struct JobTable<Value: AnyObject> {
    private struct Slot {
        var key: UInt64 = 0
        var value: Value?
    }

    private var slots: [Slot]
    private var mask: Int
    private var overflow: [UInt64: Value] = [:]
    /// Entries in the table.
    private(set) var count = 0

    /// A table whose slots cover `capacity` consecutive keys (rounded up to a power of two).
    init(capacity: Int) {
        var size = 16
        while size < capacity { size <<= 1 }
        slots = Array(repeating: Slot(), count: size)
        mask = size - 1
    }

    subscript(key: UInt64) -> Value? {
        let slot = slots[Int(truncatingIfNeeded: key) & mask]
        if slot.key == key, let value = slot.value { return value }
        return overflow.isEmpty ? nil : overflow[key]
    }

    /// Adds or replaces the entry for `key`.
    mutating func insert(_ value: Value, forKey key: UInt64) {
        let i = Int(truncatingIfNeeded: key) & mask
        if slots[i].value == nil || slots[i].key == key {
            if slots[i].value == nil {
                count += 1
                // The key may wait in `overflow` from when its slot was taken.
                if !overflow.isEmpty, overflow.removeValue(forKey: key) != nil { count -= 1 }
            }
            slots[i] = Slot(key: key, value: value)
            return
        }
        if overflow.updateValue(value, forKey: key) == nil { count += 1 }
        if overflow.count > slots.count / 8 { grow() }
    }

    /// Removes and returns the entry for `key`, if any.
    @discardableResult
    mutating func removeValue(forKey key: UInt64) -> Value? {
        let i = Int(truncatingIfNeeded: key) & mask
        if slots[i].key == key, let value = slots[i].value {
            slots[i].value = nil
            count -= 1
            return value
        }
        guard !overflow.isEmpty, let value = overflow.removeValue(forKey: key) else { return nil }
        count -= 1
        return value
    }

    /// Every entry, in no particular order.
    var allValues: [Value] {
        var all: [Value] = []
        all.reserveCapacity(count)
        for slot in slots { if let value = slot.value { all.append(value) } }
        all.append(contentsOf: overflow.values)
        return all
    }

    private mutating func grow() {
        var bigger = JobTable(capacity: slots.count * 2)
        for slot in slots { if let value = slot.value { bigger.insert(value, forKey: slot.key) } }
        for (key, value) in overflow { bigger.insert(value, forKey: key) }
        self = bigger
    }
}
