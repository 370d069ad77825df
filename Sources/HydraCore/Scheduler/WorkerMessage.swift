import DequeModule
import HydraLoop
import Synchronization

enum WorkerMessage: Sendable {
    case run(WorkTask)
    case cancel(UInt64)
    case pause
    case resume
    case configure(WorkerLimits)
}
