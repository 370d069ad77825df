/// Connection-pool limits of one ``HTTPClient`` (one per remote worker).
public struct HTTPPoolOptions: Sendable {
    /// Open connections in total.
    public var maxConnections: Int
    /// Open connections per host (name + port); more transfers wait inside the pool.
    public var maxHostConnections: Int

    public init(maxConnections: Int = 64, maxHostConnections: Int = 16) {
        self.maxConnections = maxConnections
        self.maxHostConnections = maxHostConnections
    }
}
