import Foundation
import Synchronization
import Testing
import HydraLoop

@testable import Hydra

/// Waits for the first event on `stream` that matches `predicate` (subscribe
/// before starting the work), instead of sleeping for a guessed time; fails
/// after `seconds`.
@discardableResult
func nextEvent(in stream: AsyncStream<HydraEvent>, seconds: Double = 10,
               where predicate: @escaping @Sendable (HydraEvent) -> Bool) async throws -> HydraEvent {
    let once = Locked<CheckedContinuation<HydraEvent?, Never>?>(nil)
    let event: HydraEvent? = await withCheckedContinuation { continuation in
        once.withLock { $0 = continuation }
        let resume: @Sendable (HydraEvent?) -> Void = { value in once.withLock { $0.take() }?.resume(returning: value) }
        Task {
            for await event in stream where predicate(event) {
                resume(event)
                return
            }
            resume(nil)
        }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            resume(nil)
        }
    }
    guard let event else {
        Issue.record("no matching event within \(seconds) s")
        throw WaitTimeout()
    }
    return event
}
