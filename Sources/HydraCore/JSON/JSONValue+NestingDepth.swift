extension JSONValue {
    /// How deep the value nests: a scalar 0, `[]` or `{}` 1, `[[1]]` 2.
    /// Counting stops past `limit` (the answer is then `limit + 1`), so a
    /// deep value costs no more than the levels the caller cares about.
    public func nestingDepth(upTo limit: Int) -> Int {
        guard limit >= 0 else { return 0 }
        switch self {
        case .array(let items):
            var deepest = 0
            for item in items {
                deepest = Swift.max(deepest, item.nestingDepth(upTo: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        case .object(let members):
            var deepest = 0
            for value in members.values {
                deepest = Swift.max(deepest, value.nestingDepth(upTo: limit - 1))
                if deepest >= limit { break }
            }
            return deepest + 1
        default:
            return 0
        }
    }
}
