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
    let event = await firstWithin(seconds: seconds) { () async -> HydraEvent? in
        for await event in stream where predicate(event) { return event }
        return nil
    }
    guard let event else {
        Issue.record("no matching event within \(seconds) s")
        throw WaitTimeout()
    }
    return event
}

/// What `work` returns, or nil once `seconds` passed first. A test that
/// waits this way fails instead of hanging; the work is left behind.
func firstWithin<T: Sendable>(seconds: Double, _ work: @escaping @Sendable () async -> T?) async -> T? {
    let once = Locked<CheckedContinuation<T?, Never>?>(nil)
    return await withCheckedContinuation { continuation in
        once.withLock { $0 = continuation }
        let resume: @Sendable (T?) -> Void = { value in once.withLock { $0.take() }?.resume(returning: value) }
        Task { resume(await work()) }
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            resume(nil)
        }
    }
}
