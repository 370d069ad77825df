import DequeModule
import HydraLoop
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

    public var json: JSONValue {
        ["name": .string(name), "kind": .string(kind.rawValue), "state": .string(paused ? "paused" : "running"),
         "queued": .int(queued), "active": .int(active), "done": .int(done), "failed": .int(failed)]
    }
}
