extension JSONValue {
    /// The path (`job.input.a[2]`, under `base`) of the first number in this
    /// value that no 64-bit float holds (a literal such as `1e400`, or an integer
    /// of hundreds of digits, read as infinity), or nil. Such a number would be
    /// written back as `null`: a request that carries one is refused instead,
    /// so nothing a peer sent changes silently.
    public func firstNonFiniteNumber(under base: String = "") -> String? {
        // Paths are made only for a value that has such a number: a walk that
        // built one per member cost more than parsing (a 50,000-step graph: 48 ms).
        guard hasNonFiniteNumber else { return nil }
        return pathOfNonFiniteNumber(under: base)
    }

    /// Whether a number anywhere in this value is not finite.
    private var hasNonFiniteNumber: Bool {
        switch self {
        case .double(let d): return !d.isFinite
        case .array(let items): return items.contains { $0.hasNonFiniteNumber }
        case .object(let members): return members.values.contains { $0.hasNonFiniteNumber }
        default: return false
        }
    }

    private func pathOfNonFiniteNumber(under base: String) -> String? {
        switch self {
        case .double(let d):
            return d.isFinite ? nil : base
        case .array(let items):
            for (i, item) in items.enumerated() where item.hasNonFiniteNumber {
                return item.pathOfNonFiniteNumber(under: FieldReader.join(base, "[\(i)]"))
            }
            return nil
        case .object(let members):
            for (key, value) in members where value.hasNonFiniteNumber {
                return value.pathOfNonFiniteNumber(under: FieldReader.join(base, key))
            }
            return nil
        default:
            return nil
        }
    }
}
