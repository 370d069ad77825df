import HydraCore

/// Connects the engine to the state store: finished steps (for resuming
/// graphs after a restart), every event (for `fromSeq` replay) and the start
/// of each job, and `${shared.KEY}` reads.
///
/// Every method runs on the thread that calls it (the coordinator, or the
/// emitting thread under the bus lock) and only queues a write. An event's
/// fields are encoded as JSON there, under the bus lock: the one writer
/// thread is the server's bottleneck, the emitting threads are not.
final class StoreJournal: JobJournal, EventSink, SharedDataReader {
    let store: any StateStore

    init(store: any StateStore) { self.store = store }

    func stepFinished(jobId: String, stepPath: String, outcome: StoredStep) {
        store.recordStep(jobId: jobId, stepPath: stepPath, outcome: outcome, done: nil)
    }

    func jobStarted(jobId: String, at time: Double) {
        store.markStarted(jobId: jobId, at: time)
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
