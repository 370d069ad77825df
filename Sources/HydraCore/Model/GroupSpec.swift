import OrderedCollections

/// The steps of a serial or concurrent group.
public struct GroupSpec: Sendable {
    public var steps: [JobSpec]
    /// Serial default true (later steps usually need earlier results); concurrent default false.
    public var stopWhenFailed: Bool
    /// Concurrent groups only: steps running at once (nil: all).
    public var maxConcurrency: Int?
    public init(steps: [JobSpec], stopWhenFailed: Bool, maxConcurrency: Int? = nil) {
        self.steps = steps
        self.stopWhenFailed = stopWhenFailed
        self.maxConcurrency = maxConcurrency
    }
}
