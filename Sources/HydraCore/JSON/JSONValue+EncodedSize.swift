extension JSONValue {
    /// The length of this value's compact JSON text (as ``JSONWriter`` writes
    /// it), or nil when it is longer than `limit` bytes.
    ///
    /// Why not encode and count: the values this guards against (a reference
    /// that doubles a result at every step, a huge body) are the ones that must
    /// never be encoded whole. The walk stops as soon as the limit is passed,
    /// so its cost is bounded by `limit`, whatever the value's size.
    public func encodedSize(limit: Int) -> Int? {
        var budget = limit
        return Self.charge(self, &budget) ? limit - budget : nil
    }

    /// Subtracts the value's encoded length from `budget`; false once it went below zero.
    private static func charge(_ value: JSONValue, _ budget: inout Int) -> Bool {
        switch value {
        case .null: budget -= 4
        case .bool(let b): budget -= b ? 4 : 5
        case .int(let i): budget -= decimalLength(i)
        case .double: budget -= JSONWriter.bytes(value).count
        case .string(let s): return chargeString(s, &budget)
        case .array(let items):
            budget -= 2 + max(0, items.count - 1)
            if budget < 0 { return false }
            for item in items where !charge(item, &budget) { return false }
        case .object(let members):
            budget -= 2 + max(0, members.count - 1) + members.count  // braces, commas, colons
            if budget < 0 { return false }
            for (key, item) in members {
                if !chargeString(key, &budget) || !charge(item, &budget) { return false }
            }
        }
        return budget >= 0
    }

    private static func chargeString(_ s: String, _ budget: inout Int) -> Bool {
        let utf8 = s.utf8
        budget -= utf8.count + 2
        // Escapes only add: a string already over the budget is not scanned.
        if budget < 0 { return false }
        // Over the bytes in place (every result's keys and texts pass here, on the
        // coordinator's thread; iterating the UTF-8 view cost a third of its time
        // per resource job in a profile).
        let escapes = utf8.withContiguousStorageIfAvailable(escapeLength) ?? escapeLength(utf8)
        budget -= escapes
        return budget >= 0
    }

    /// What escaping adds to a string's bytes: one for `"`, `\`, LF, CR and
    /// tab, five for another control character (`\u00XX`).
    private static func escapeLength<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> Int {
        var extra = 0
        for byte in bytes where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: extra += 1
            default: extra += 5
            }
        }
        return extra
    }

    private static func decimalLength(_ i: Int) -> Int {
        var n = i.magnitude
        var length = i < 0 ? 2 : 1
        while n >= 10 {
            n /= 10
            length += 1
        }
        return length
    }
}
