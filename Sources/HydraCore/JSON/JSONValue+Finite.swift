extension JSONValue {
    /// The path (`job.input.a[2]`, under `base`) of the first number in this
    /// value that no 64-bit float holds (a literal such as `1e400`, or an integer
    /// of hundreds of digits, read as infinity), or nil. Such a number would be
    /// written back as `null`: a request that carries one is refused instead,
    /// so nothing a peer sent changes silently.
    public func firstNonFiniteNumber(under base: String = "") -> String? {
        switch self {
        case .double(let d):
            return d.isFinite ? nil : base
        case .array(let items):
            for (i, item) in items.enumerated() {
                if let path = item.firstNonFiniteNumber(under: FieldReader.join(base, "[\(i)]")) { return path }
            }
            return nil
        case .object(let members):
            for (key, value) in members {
                if let path = value.firstNonFiniteNumber(under: FieldReader.join(base, key)) { return path }
            }
            return nil
        default:
            return nil
        }
    }
}
