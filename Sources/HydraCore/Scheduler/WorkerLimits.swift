/// The limits of a worker that may change while it runs (`worker.configure`):
/// tasks running at once, and for a remote worker its connection pool.
public struct WorkerLimits: Sendable, Equatable {
    public var maxActive: Int
    public var maxConnections: Int
    public var maxHostConnections: Int

    public init(maxActive: Int, maxConnections: Int, maxHostConnections: Int) {
        self.maxActive = maxActive
        self.maxConnections = maxConnections
        self.maxHostConnections = maxHostConnections
    }

    init(_ configuration: Configuration.Worker) {
        self.init(maxActive: configuration.maxActive, maxConnections: configuration.maxConnections,
                  maxHostConnections: configuration.maxHostConnections)
    }
}
