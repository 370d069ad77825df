import HydraLoop

/// The results by step id and the input of one graph (the root, or a named job). Coordinator loop only.
final class GraphScope {
    let input: JSONValue
    @exclusivity(unchecked) var results: [String: JSONValue] = [:]
    init(input: JSONValue) { self.input = input }
}
