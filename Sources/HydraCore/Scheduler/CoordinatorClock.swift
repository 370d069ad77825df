import Foundation
import HydraLoop

/// Time as the coordinator sees it: the timestamps of jobs (`createdAt`,
/// `startedAt`, `finishedAt`) and the timers of step and group timeouts.
///
/// The engine runs on ``SystemClock`` (the wall clock and the coordinator
/// loop's timers). A test injects its own to drive timeouts without waiting
/// and to know every timestamp in advance.
public protocol CoordinatorClock: Sendable {
    /// Seconds since 1970.
    func now() -> Double
    /// Calls `body` on `loop` (the coordinator's) after `milliseconds`, unless
    /// the returned timer is cancelled first. Called on `loop`.
    func schedule(afterMilliseconds milliseconds: UInt64, on loop: EventLoop,
                  _ body: @escaping () -> Void) -> any CoordinatorTimer
}

/// A pending timeout; cancelled on the coordinator loop when its step ends first.
public protocol CoordinatorTimer: AnyObject {
    func cancel()
}

extension ScheduledTask: CoordinatorTimer {}

/// The wall clock and libuv timers on the coordinator's loop.
public struct SystemClock: CoordinatorClock {
    public init() {}

    public func now() -> Double { Date().timeIntervalSince1970 }

    public func schedule(afterMilliseconds milliseconds: UInt64, on loop: EventLoop,
                         _ body: @escaping () -> Void) -> any CoordinatorTimer {
        loop.schedule(afterMilliseconds: milliseconds, body)
    }
}
