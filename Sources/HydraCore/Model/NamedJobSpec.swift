import OrderedCollections

/// A job graph from the jobs folder (`"type": "job"`).
public struct NamedJobSpec: Sendable {
    public var name: String
    /// The input its steps see as `${input.…}` (references resolved against the caller's scope).
    public var input: JSONValue?
    /// The loaded graph, filled in when the spec is submitted.
    public var resolved: JobSpec?
    public init(name: String, input: JSONValue? = nil) {
        self.name = name
        self.input = input
    }
}
