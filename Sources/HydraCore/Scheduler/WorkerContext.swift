import HydraLoop

/// What an executor knows about the worker it runs on.
public struct WorkerContext: Sendable {
    public let name: String
    public let kind: JobKind
    public let loop: EventLoop
    public let configuration: Configuration.Worker
    /// What the managers on this worker share (its loop thread only).
    public let services: WorkerServices
}
