import OrderedCollections

/// A named local job (`"type": "local"`).
public struct LocalSpec: Sendable {
    public var name: String
    public var input: JSONValue
    /// See ``JobSpec/deferredJSON``.
    var deferred: DeferredJSON?
    public init(name: String, input: JSONValue = .null) {
        self.name = name
        self.input = input
    }
}
