/// A few values keyed by job type name (`remote`, `resource`, `local`), for
/// what is looked up for every job: parallel arrays found by a scan, not a
/// hash (the names are short inline strings, each compared in one step).
struct TypeTable<Value> {
    private var names: [String] = []
    private var values: [Value] = []

    /// Sets `value` for `name`; a later value for a name replaces the earlier one.
    mutating func set(_ value: Value, for name: String) {
        if let i = names.firstIndex(of: name) {
            values[i] = value
        } else {
            names.append(name)
            values.append(value)
        }
    }

    subscript(name: String) -> Value? {
        for i in names.indices where names[i] == name { return values[i] }
        return nil
    }
}

extension TypeTable: Sendable where Value: Sendable {}
