import HydraCore
import HydraLoop

/// Connects the engine to the state store: the life of each journaled job
/// (start, finished steps, final result), every event (for `fromSeq`
/// replay), and `${shared.KEY}` reads. It also counts how journaled jobs
/// ended, for `hydra.stats`.
///
/// Every method runs on the thread that calls it (the coordinator, or the
/// emitting thread under the bus lock) and only queues a write. An event's
/// fields are encoded as JSON there, under the bus lock: the one writer
/// thread is the server's bottleneck, the emitting threads are not.
final class StoreJournal: JobJournal, EventSink, SharedDataReader {
    let store: any StateStore
    /// How many journaled jobs ended in each final state.
    let endings = Locked(Endings())

    struct Endings {
        var succeeded = 0
        var failed = 0
        var cancelled = 0
    }

    init(store: any StateStore) { self.store = store }

    func jobStarted(jobId: String, at time: Double) {
        store.markStarted(jobId: jobId, at: time)
    }

    func stepFinished(jobId: String, stepPath: String, outcome: StoredStep) {
        store.recordStep(jobId: jobId, stepPath: stepPath, outcome: outcome, done: nil)
    }

    func jobFinished(jobId: String, state: JobState, result: [UInt8], at time: Double) {
        store.finish(jobId: jobId, state: state, result: result, at: time, done: nil)
        endings.withLock {
            switch state {
            case .succeeded: $0.succeeded += 1
            case .cancelled: $0.cancelled += 1
            default: $0.failed += 1
            }
        }
    }

    func receive(_ event: HydraEvent) {
        store.append(event)
    }

    func value(forKey key: String) -> JSONValue? {
        try? store.sharedValue(key)
    }

    func isSecret(_ key: String) -> Bool {
        store.sharedCipher(key) == .aesGCM
    }
}
