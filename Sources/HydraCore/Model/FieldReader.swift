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

    public init(_ value: JSONValue, path: String) throws(ValidationError) {
        guard case .object(let members) = value else {
            throw ValidationError(path: path, expected: "object", got: value)
        }
        self.members = members
        self.path = path
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
        guard let i = members.index(forKey: key) else { return nil }
        if i < 64 { readLow |= 1 << UInt64(i) } else { readHigh.insert(i) }
        return members.values[i]
    }

    public mutating func value(_ key: String) -> JSONValue? {
        guard let i = members.index(forKey: key) else { return nil }
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
        guard let s = try string(key) else { throw ValidationError(path: path(key), "required") }
        return s
    }

    public mutating func int(_ key: String, min: Int = .min, max: Int = .max) throws(ValidationError) -> Int? {
        guard let value = value(key) else { return nil }
        guard let i = value.intValue else {
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
            let read = i < 64 ? readLow & (1 << UInt64(i)) != 0 : readHigh.contains(i)
            // A key is echoed in the error (message and `data.field`): a long one only in part.
            if !read { throw ValidationError(path: path(key.count <= 100 ? key : String(key.prefix(100)) + "…"), "unknown key") }
        }
    }
}
