import OrderedCollections

/// Reads the members of one JSON object with typed accessors that report
/// errors by path, and refuses keys it was not asked about (a typo must not be
/// silently ignored). Used for job specs and the configuration file.
public struct FieldReader {
    public let members: OrderedDictionary<String, JSONValue>
    public let path: String
    /// Which members an accessor asked for, by index: bit i for the first 64
    /// (spec objects are small: no hashing, no allocation), a set beyond.
    private var readLow: UInt64 = 0
    private var readHigh: Set<Int> = []
    /// The lengths of the member names, as bit `min(length, 63)`: most
    /// accessors ask for a key the object does not have (a remote step names
    /// 2 of its ~25 fields), and a length no member has answers without
    /// comparing names (that scan was a third of decoding a 50,000-step graph).
    private let keyLengths: UInt64

    public init(_ value: JSONValue, path: String) throws(ValidationError) {
        guard case .object(let members) = value else {
            throw ValidationError(path: path, expected: "object", got: value)
        }
        self.members = members
        self.path = path
        var lengths: UInt64 = 0
        for key in members.keys { lengths |= FieldReader.lengthBit(key) }
        keyLengths = lengths
    }

    @inline(__always)
    private static func lengthBit(_ key: String) -> UInt64 { 1 << UInt64(min(key.utf8.count, 63)) }

    /// The index of member `key`, if any.
    @inline(__always)
    private func index(of key: String) -> Int? {
        keyLengths & FieldReader.lengthBit(key) == 0 ? nil : members.index(forKey: key)
    }

    /// `a` + `b` → `a.b`; `a` + `[1]` → `a[1]`.
    public static func join(_ base: String, _ key: String) -> String {
        if base.isEmpty { return key }
        if key.isEmpty { return base }
        return key.hasPrefix("[") ? base + key : base + "." + key
    }

    public func path(_ key: String) -> String { FieldReader.join(path, key) }

    /// The member `key` as given, JSON `null` included (nil only when absent):
    /// for fields whose value may be any JSON value, `null` too.
    public mutating func valueOrNull(_ key: String) -> JSONValue? {
        guard let i = index(of: key) else { return nil }
        if i < 64 { readLow |= 1 << UInt64(i) } else { readHigh.insert(i) }
        return members.values[i]
    }

    public mutating func value(_ key: String) -> JSONValue? {
        guard let i = index(of: key) else { return nil }
        if i < 64 { readLow |= 1 << UInt64(i) } else { readHigh.insert(i) }
        let value = members.values[i]
        if value.isNull { return nil }  // (not `?:`: JSONValue is nil-literal expressible)
        return value
    }

    public mutating func string(_ key: String) throws(ValidationError) -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let s) = value else { throw ValidationError(path: path(key), expected: "string", got: value) }
        return s
    }

    public mutating func requiredString(_ key: String) throws(ValidationError) -> String {
        guard let s = try string(key) else { throw missing(key) }
        return s
    }

    /// The refusal of a required member `key` that is absent. When a member
    /// no accessor asked for looks like a misspelling of it (`knd` for `kind`),
    /// that member is what to fix, so the error names it.
    public func missing(_ key: String) -> ValidationError {
        for (i, name) in members.keys.enumerated() where !wasRead(i) && FieldReader.looksMisspelt(name, for: key) {
            return ValidationError(path: path(name), "unknown key (did you mean '\(key)'?)").refusingKey()
        }
        return ValidationError(path: path(key), "required").refusingAbsence()
    }

    private func wasRead(_ i: Int) -> Bool { i < 64 ? readLow & (1 << UInt64(i)) != 0 : readHigh.contains(i) }

    /// Whether `name` is `key` in another case or within one edit of it (two
    /// for keys longer than four characters), a swap of neighbours being one edit.
    public static func looksMisspelt(_ name: String, for key: String) -> Bool {
        let a = Array(name.lowercased().utf8), b = Array(key.lowercased().utf8)
        let limit = b.count > 4 ? 2 : 1
        guard abs(a.count - b.count) <= limit, a.count < 64 else { return false }
        // Optimal string alignment distance, rows of the usual table.
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...max(a.count, 1) where !a.isEmpty {
            current[0] = i
            for j in 1...max(b.count, 1) where !b.isEmpty {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = Swift.min(current[j], before[j - 2] + 1)
                }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count] <= limit
    }

    public mutating func int(_ key: String, min: Int = .min, max: Int = .max) throws(ValidationError) -> Int? {
        guard let value = value(key) else { return nil }
        guard let i = value.intValue else {
            if value.isInexactWholeNumber { throw ValidationError(path: path(key), JSONValue.inexactWholeNumberReason) }
            // A whole number past Int's range arrives as a Double: say it is out of range, not "not an integer".
            if case .double(let d) = value, d.isFinite, d == d.rounded() {
                throw ValidationError(path: path(key), d < 0 ? "must be at least \(min)" : "must be at most \(max)")
            }
            throw ValidationError(path: path(key), expected: "integer", got: value)
        }
        guard i >= min else { throw ValidationError(path: path(key), "must be at least \(min)") }
        guard i <= max else { throw ValidationError(path: path(key), "must be at most \(max)") }
        return i
    }

    public mutating func bool(_ key: String) throws(ValidationError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let b) = value else { throw ValidationError(path: path(key), expected: "boolean", got: value) }
        return b
    }

    public mutating func array(_ key: String) throws(ValidationError) -> [JSONValue]? {
        guard let value = value(key) else { return nil }
        guard case .array(let items) = value else { throw ValidationError(path: path(key), expected: "array", got: value) }
        return items
    }

    public mutating func object(_ key: String) throws(ValidationError) -> FieldReader? {
        guard let value = value(key) else { return nil }
        return try FieldReader(value, path: path(key))
    }

    /// An object whose members are all strings (headers, servers).
    public mutating func stringMap(_ key: String) throws(ValidationError) -> OrderedDictionary<String, String>? {
        guard let reader = try object(key) else { return nil }
        var result = OrderedDictionary<String, String>()
        for (name, value) in reader.members {
            guard case .string(let s) = value else {
                throw ValidationError(path: reader.path(name), expected: "string", got: value)
            }
            result[name] = s
        }
        return result
    }

    /// An array whose items are all strings.
    public mutating func stringArray(_ key: String) throws(ValidationError) -> [String]? {
        guard let items = try array(key) else { return nil }
        var result: [String] = []
        for (i, item) in items.enumerated() {
            guard case .string(let s) = item else {
                throw ValidationError(path: path(key) + "[\(i)]", expected: "string", got: item)
            }
            result.append(s)
        }
        return result
    }

    /// Fails on the first member that no accessor asked for.
    public func rejectUnknownKeys() throws(ValidationError) {
        if members.count <= 64 {
            let everyMember: UInt64 = members.count == 64 ? .max : (1 << UInt64(members.count)) - 1
            if readLow == everyMember { return }
        }
        for (i, key) in members.keys.enumerated() {
            // A key is echoed in the error (message and `data.field`): a long one only in part.
            if !wasRead(i) {
                throw ValidationError(path: path(ValidationError.clip(key)), "unknown key").refusingKey()
            }
        }
    }
}
