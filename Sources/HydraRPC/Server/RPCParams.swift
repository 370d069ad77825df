import HydraCore
import HydraServer
import OrderedCollections

/// Typed reads of a request's params; errors name the field (`jobId: expected string`).
///
/// Every method first calls ``only(_:)`` with the members it takes, so a
/// misspelt member is refused (`idempotencyKy: unknown key`, protocol §2)
/// instead of silently ignored. Immutable.
struct RPCParams: Sendable {
    let values: OrderedDictionary<String, JSONValue>
    /// The params were a non-empty array (by position): no method here takes those.
    let positional: Bool

    init(_ values: OrderedDictionary<String, JSONValue>, positional: Bool = false) {
        self.values = values
        self.positional = positional
    }

    /// Refuses params given by position, and any member not in `allowed`
    /// (the first one, in the order sent).
    func only(_ allowed: Set<String>) throws(ServiceError) {
        if positional {
            throw invalid("params", "expected an object of named members; params by position are not supported")
        }
        if let unknown = values.keys.first(where: { !allowed.contains($0) }) {
            throw invalid(ServiceError.clip(unknown), "unknown key")
        }
        if let path = JSONValue.object(values).firstNonFiniteNumber() {
            throw invalid(ServiceError.clip(path), "number out of range (a JSON number must fit a 64-bit float)")
        }
    }

    subscript(key: String) -> JSONValue? {
        guard let value = values[key], !value.isNull else { return nil }
        return value
    }

    func string(_ key: String) throws(ServiceError) -> String? {
        guard let value = self[key] else { return nil }
        guard let s = value.stringValue else { throw mistyped(key, "string", value) }
        return s
    }

    func requiredString(_ key: String) throws(ServiceError) -> String {
        guard let s = try string(key) else { throw invalid(key, "required") }
        guard !s.isEmpty else { throw invalid(key, "must not be empty") }
        return s
    }

    func int(_ key: String, min: Int = .min, max: Int = .max) throws(ServiceError) -> Int? {
        guard let value = self[key] else { return nil }
        guard let i = value.intValue else {
            if value.isInexactWholeNumber { throw invalid(key, JSONValue.inexactWholeNumberReason) }
            throw mistyped(key, "integer", value)
        }
        guard i >= min, i <= max else { throw invalid(key, "must be between \(min) and \(max)") }
        return i
    }

    func bool(_ key: String) throws(ServiceError) -> Bool? {
        guard let value = self[key] else { return nil }
        guard let b = value.boolValue else { throw mistyped(key, "boolean", value) }
        return b
    }

    /// `refuse` says what is wrong with an item (nil: nothing); the error names the item by its index.
    func stringSet(_ key: String, refuse: (String) -> String? = { _ in nil }) throws(ServiceError) -> Set<String>? {
        guard let value = self[key] else { return nil }
        guard let items = value.arrayValue else { throw mistyped(key, "array of strings", value) }
        guard items.count <= RPCLimits.maxFilterEntries else {
            throw invalid(key, "at most \(RPCLimits.maxFilterEntries) entries (got \(items.count)): subscribe without it, or in several subscriptions")
        }
        var out = Set<String>()
        for (i, item) in items.enumerated() {
            guard let s = item.stringValue else { throw mistyped("\(key)[\(i)]", "string", item) }
            if let problem = refuse(s) { throw invalid("\(key)[\(i)]", problem) }
            out.insert(s)
        }
        return out
    }

    /// `field: expected TYPE`, what was sent in `data.reason` (`expected TYPE, got TYPE`):
    /// the form of job specs' errors (protocol §2).
    func mistyped(_ field: String, _ type: String, _ value: JSONValue) -> ServiceError {
        ServiceError(.invalidParams, "\(field): expected \(type)",
                     data: ["field": .string(field), "reason": .string("expected \(type), got \(value.typeName)")])
    }

    func invalid(_ field: String, _ reason: String) -> ServiceError { .invalidParams(field: field, reason) }
}
