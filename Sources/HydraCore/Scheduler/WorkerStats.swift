import DequeModule
import HydraLoop
import OrderedCollections
import Synchronization

/// A worker's counters (`worker.list`).
public struct WorkerStats: Sendable {
    public var name: String
    public var kind: JobKind
    public var paused: Bool
    public var queued: Int
    public var active: Int
    public var done: Int
    public var failed: Int
    /// The limits in force (extension: `worker.list` shows them).
    public var limits: WorkerLimits

    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = [
            "name": .string(name), "kind": .string(kind.rawValue), "state": .string(paused ? "paused" : "running"),
            "queued": .int(queued), "active": .int(active), "done": .int(done), "failed": .int(failed),
            "maxActive": .int(limits.maxActive),
        ]
        if kind == .remote {
            o["maxConnections"] = .int(limits.maxConnections)
            o["maxHostConnections"] = .int(limits.maxHostConnections)
        }
        return .object(o)
    }
}
