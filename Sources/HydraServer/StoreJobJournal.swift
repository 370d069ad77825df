import HydraCore
import HydraLoop

/// The engine's ``JobJournal`` over the jobs slice of the state store: the
/// life of each journaled job (start, finished steps, final result), so a
/// restarted server resumes it and the store answers for it once the engine
/// has forgotten it. It also counts how journaled jobs ended, for `hydra.stats`.
///
/// Called on the coordinator's thread; every method only queues a write.
final class StoreJobJournal: JobJournal {
    let store: any JobStore
    /// How many journaled jobs ended in each final state.
    let endings = Locked(Endings())

    struct Endings {
        var succeeded = 0
        var failed = 0
        var cancelled = 0
    }

    init(store: any JobStore) { self.store = store }

    func jobStarted(jobId: String, at time: Double) {
        store.markStarted(jobId: jobId, at: time)
    }

    func stepFinished(jobId: String, stepPath: String, step: EncodedStep, finalEventFollows: Bool) {
        store.recordStep(jobId: jobId, stepPath: stepPath, step: step, withFinalEvent: finalEventFollows, done: nil)
    }

    func jobFinished(jobId: String, state: JobState, result: [UInt8], at time: Double, finalEventFollows: Bool) {
        store.finish(jobId: jobId, state: state, result: result, at: time, withFinalEvent: finalEventFollows, done: nil)
        endings.withLock {
            switch state {
            case .succeeded: $0.succeeded += 1
            case .cancelled: $0.cancelled += 1
            default: $0.failed += 1
            }
        }
    }
}
