import HydraLoop

/// The results by step id and the input of one graph (the root, or a named job). Coordinator loop only.
final class GraphScope {
    let input: JSONValue
    @exclusivity(unchecked) var results: [String: JSONValue] = [:]
    /// The secrets of the steps (by id) whose result in ``results`` is kept in
    /// clear for references (see ``GraphNode/clearResult``): a step reading one masks them too.
    @exclusivity(unchecked) var secrets: [String: SecretMask] = [:]
    init(input: JSONValue) { self.input = input }
}
