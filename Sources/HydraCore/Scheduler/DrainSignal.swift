import HydraLoop

/// A one-shot wake-up for ``Scheduler/drain(timeout:)``: `fire` may come
/// from any thread, before or after `wait`, any number of times; the first
/// one counts. Thread-safe.
final class DrainSignal: Sendable {
    private let state = Locked<(fired: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Returns once `fire` was called (at once if it already was).
    func wait() async {
        await withCheckedContinuation { continuation in
            let fired = state.withLock { state -> Bool in
                if !state.fired { state.waiter = continuation }
                return state.fired
            }
            if fired { continuation.resume() }
        }
    }

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.fired else { return nil }
            state.fired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
