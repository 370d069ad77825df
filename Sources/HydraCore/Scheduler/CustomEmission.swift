import OrderedCollections
import Synchronization

/// A custom event (`custom.NAME`) a task sends while it runs: the `emit`
/// local job's. It travels to the coordinator with the task's other reports
/// (``TaskHandle/emit(_:)``), so subscribers see it after the task's
/// `job.started` and before its final event, protocol §6's order for a job's
/// events; sent straight to the bus from the worker, it overtook the
/// `job.started` the worker had not yet announced.
///
/// Threads: made on the worker's loop; ``seq`` is set once on the
/// coordinator's thread and read by whoever builds the task's result after.
public final class CustomEmission: Sendable {
    public let name: String
    public let fields: OrderedDictionary<String, JSONValue>
    private let issuedSeq = Atomic<UInt64>(0)

    public init(name: String, fields: OrderedDictionary<String, JSONValue>) {
        self.name = name
        self.fields = fields
    }

    /// The event's seq once the coordinator has issued it; 0 before, and for
    /// good when the task had ended (cancelled, timed out) by the time it arrived.
    public var seq: UInt64 { issuedSeq.load(ordering: .acquiring) }

    func issued(_ seq: UInt64) { issuedSeq.store(seq, ordering: .releasing) }
}
