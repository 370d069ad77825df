import OrderedCollections

/// A JSON value. Objects keep their keys in insertion order, so what Hydra
/// writes reads in the order it was built (and round-trips what it read).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(OrderedDictionary<String, JSONValue>)

    /// An empty object.
    public static var emptyObject: JSONValue { .object([:]) }

    /// The member `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array, or nil.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }

    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    public var boolValue: Bool? { if case .bool(let b) = self { return b }; return nil }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
    public var objectValue: OrderedDictionary<String, JSONValue>? {
        if case .object(let o) = self { return o }
        return nil
    }
    public var isNull: Bool { if case .null = self { return true }; return false }

    /// The value as an integer when it is an integral number.
    public var intValue: Int? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int(d)
        default: return nil
        }
    }

    /// True for a whole number written with an exponent or a fraction (`1e18`,
    /// `9007199254740993.0`) that ``intValue`` does not take: past 9e15 such a
    /// number may not be the integer its text says, though within Int's range.
    public var isInexactWholeNumber: Bool {
        guard case .double(let d) = self, d.isFinite, d.rounded() == d else { return false }
        return abs(d) >= 9.0e15 && abs(d) < 9.2e18
    }

    /// What to say of a whole number ``intValue`` does not take though it is in Int's range.
    public static let inexactWholeNumberReason = "an integer of 16 or more digits is read exactly only when written in digits (no exponent, no fraction)"

    /// The value as a floating-point number when it is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// A short name of the value's JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// Follows a dot-separated path of object keys and array indexes
    /// (`body.items.0.id`). An empty path is the value itself.
    public func value(atPath path: some StringProtocol) -> JSONValue? {
        var current = self
        if path.isEmpty { return current }
        for component in path.split(separator: ".", omittingEmptySubsequences: false) {
            switch current {
            case .object(let members):
                guard let next = members[String(component)] else { return nil }
                current = next
            case .array(let items):
                guard let index = Int(component), items.indices.contains(index) else { return nil }
                current = items[index]
            default:
                return nil
            }
        }
        return current
    }

    /// Numbers compare by value (`1` equals `1.0`), everything else structurally.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.int, .double), (.double, .int), (.double, .double): return lhs.doubleValue == rhs.doubleValue
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { key, value in b[key] == value }
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .int, .double: hasher.combine(doubleValue!)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o):
            hasher.combine(o.count)
            for key in o.keys.sorted() { hasher.combine(key); hasher.combine(o[key]!) }
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(OrderedDictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text of the value.
    public var description: String { JSONWriter.string(self) }
}
