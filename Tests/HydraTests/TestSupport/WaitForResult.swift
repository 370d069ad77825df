import HydraLoop
import Dispatch
import Synchronization

/// Calls `start` with a completion callback and waits for the result it delivers
/// (on whatever thread it is called): for the callback APIs of the store and the service.
func waitForResult<T: Sendable, E: Error>(_ start: (@escaping @Sendable (Result<T, E>) -> Void) -> Void) throws(E) -> T {
    let outcome = Locked<Result<T, E>?>(nil)
    let done = DispatchSemaphore(value: 0)
    start { result in
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    // The semaphore is only signalled after the result was stored.
    return try outcome.withLock { $0 }!.get()
}
