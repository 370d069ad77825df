import Foundation
import OrderedCollections

/// `${EXPR}` substitution in spec strings. A string that is exactly one
/// reference takes the referenced value with its JSON type; otherwise each
/// reference is replaced by its text (strings as they are, other values as JSON).
public enum Template {
    /// Whether `string` holds `${`. Runs for every leaf a coordinator
    /// dispatches, so it reads the UTF-8 in place rather than through an iterator.
    public static func containsReference(_ string: String) -> Bool {
        if let found = string.utf8.withContiguousStorageIfAvailable(containsReference(utf8:)) { return found }
        return Array(string.utf8).withUnsafeBufferPointer(containsReference(utf8:))
    }

    /// Looks for each `$` and checks the byte after it: this runs for every
    /// string field of every job, most of them with no `$` at all, so eight
    /// bytes are tested at once (the "has a zero byte" test on a 64-bit word,
    /// as ``JSONWriter`` does; a search a byte at a time cost ~8 instructions
    /// per byte, a fifth of a memory hit's checks at submit).
    private static func containsReference(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = bytes.count
        func reference(at j: Int) -> Bool { bytes[j] == UInt8(ascii: "$") && j + 1 < n && bytes[j + 1] == UInt8(ascii: "{") }
        guard n >= 8 else { return (0..<n).contains(where: reference(at:)) }
        let raw = UnsafeRawBufferPointer(bytes)
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let dollars = ones &* UInt64(UInt8(ascii: "$"))
        var at = 0
        while true {
            // The last word overlaps the one before it: no byte-by-byte tail.
            at = min(at, n - 8)
            let word = raw.loadUnaligned(fromByteOffset: at, as: UInt64.self) ^ dollars
            if (word &- ones) & ~word & highs != 0, (at..<(at + 8)).contains(where: reference(at:)) { return true }
            if at == n - 8 { return false }
            at += 8
        }
    }

    public static func containsReference(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let s): return containsReference(s)
        case .array(let items): return items.contains(where: containsReference)
        case .object(let members): return members.values.contains(where: containsReference)
        default: return false
        }
    }

    /// Resolves every reference inside `value`, at any depth.
    public static func resolve(_ value: JSONValue, in scope: ReferenceScope) throws(ReferenceError) -> JSONValue {
        switch value {
        case .string(let s): return try resolve(s, in: scope)
        case .array(let items):
            var out: [JSONValue] = []
            out.reserveCapacity(items.count)
            for item in items { out.append(try resolve(item, in: scope)) }
            return .array(out)
        case .object(let members):
            var out = OrderedDictionary<String, JSONValue>()
            out.reserveCapacity(members.count)
            for (key, item) in members { out[key] = try resolve(item, in: scope) }
            return .object(out)
        default:
            return value
        }
    }

    /// Whether `string` is exactly one reference (`${input.age}`): it then
    /// takes the referenced value with its JSON type, whatever that is.
    public static func isWholeReference(_ string: String) -> Bool {
        guard string.hasPrefix("${"), string.hasSuffix("}"), let close = string.firstIndex(of: "}") else { return false }
        return close == string.index(before: string.endIndex)
    }

    /// Resolves a string: typed when it is exactly one reference, else text.
    public static func resolve(_ string: String, in scope: ReferenceScope) throws(ReferenceError) -> JSONValue {
        guard containsReference(string) else { return .string(string) }
        if isWholeReference(string), let close = string.firstIndex(of: "}") {
            let expression = String(string[string.index(string.startIndex, offsetBy: 2)..<close])
            let value = try lookUp(expression, in: scope)
            try scope.budget?.charge(value, for: expression)
            return value
        }
        return .string(try resolveText(string, in: scope))
    }

    /// Resolves a string to text, whatever the referenced types.
    public static func resolveText(_ string: String, in scope: ReferenceScope) throws(ReferenceError) -> String {
        guard containsReference(string) else { return string }
        var out = ""
        var rest = string[...]
        while let open = rest.range(of: "${") {
            out += rest[..<open.lowerBound]
            guard let close = rest[open.upperBound...].firstIndex(of: "}") else {
                throw ReferenceError(reference: String(rest[open.upperBound...]), reason: "missing '}'")
            }
            let expression = String(rest[open.upperBound..<close])
            let value = try lookUp(expression, in: scope)
            // Counted before the text is made: a value past the budget is never written out.
            try scope.budget?.charge(value, for: expression)
            out += text(of: value)
            rest = rest[rest.index(after: close)...]
        }
        out += rest
        return out
    }

    /// The text a value takes inside a longer string.
    public static func text(of value: JSONValue) -> String {
        if case .string(let s) = value { return s }
        return JSONWriter.string(value)
    }

    private static func lookUp(_ expression: String, in scope: ReferenceScope) throws(ReferenceError) -> JSONValue {
        let parts = expression.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let root = parts[0]
        let rest = parts.count > 1 ? parts[1] : ""
        func follow(_ base: JSONValue, _ path: Substring, what: String) throws(ReferenceError) -> JSONValue {
            guard let value = base.value(atPath: path) else {
                throw ReferenceError(reference: expression, reason: "no value at '\(path)' in \(what)")
            }
            return value
        }
        switch root {
        case "prev":
            guard let previous = scope.previous else {
                throw ReferenceError(reference: expression, reason: "no result from a previous step (prev is for serial steps after the first, when that step succeeded)")
            }
            return try follow(previous, rest, what: "the previous step's result")
        case "steps":
            let idAndPath = rest.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            let id = String(idAndPath[0])
            guard !id.isEmpty else { throw ReferenceError(reference: expression, reason: "missing step id") }
            guard let result = scope.step(id) else {
                throw ReferenceError(reference: expression, reason: "no finished step with id '\(id)'")
            }
            return try follow(result, idAndPath.count > 1 ? idAndPath[1] : "", what: "step '\(id)'")
        case "input":
            return try follow(scope.input, rest, what: "the input")
        case "shared":
            guard !rest.isEmpty else { throw ReferenceError(reference: expression, reason: "missing key") }
            guard let value = scope.shared(String(rest)) else {
                throw ReferenceError(reference: expression, reason: scope.sharedProblem(String(rest)) ?? "no shared value '\(rest)'")
            }
            return value
        case "env":
            guard let value = scope.environment(String(rest)) else {
                throw ReferenceError(reference: expression,
                                     reason: "environment variable '\(rest)' is unset or not listed in allowEnv")
            }
            return .string(value)
        default:
            throw ReferenceError(reference: expression, reason: "unknown root '\(root)' (expected prev, steps, input, shared or env)")
        }
    }
}
