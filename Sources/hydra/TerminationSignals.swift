import Foundation
import HydraLoop
import Synchronization

/// SIGTERM and SIGINT as one awaitable event, plus a periodic upkeep task, on a
/// small loop thread of their own (`hydra-signals`).
///
/// Create it before the server announces itself: the handlers are installed when
/// `init` returns, and a signal that arrives before ``wait()`` is remembered, so a
/// supervisor may stop the server the moment it reads "serving on". (Dispatch signal
/// sources register asynchronously: a signal sent right after one is resumed could
/// be lost or kill the process; a test stops servers that fast.)
final class TerminationSignals: Sendable {
    private let loop = EventLoop(name: "hydra-signals")
    /// The first signal received, or the waiter for it.
    private let state = Locked<(received: String?, waiter: CheckedContinuation<String, Never>?)>((nil, nil))
    /// What a signal after the first one does (set by ``onRepeat(_:)``), and
    /// the last such signal that came before it was set.
    private let repeated = Locked<(body: (@Sendable (String) -> Void)?, early: String?)>((nil, nil))

    /// Takes over SIGTERM and SIGINT (and ignores SIGPIPE); runs `upkeep` on the signal
    /// thread every `upkeepEvery` seconds.
    init(upkeepEvery: Double, upkeep: @escaping @Sendable () -> Void) {
        signal(SIGPIPE, SIG_IGN)
        let period = UInt64(upkeepEvery * 1000)
        loop.submitAndWait { [loop, self] in
            var handles: [() -> Void] = []
            for (number, name) in [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")] {
                let watcher = SignalWatcher(loop: loop)
                watcher.start(signal: number) { _ in self.fire(name) }
                handles.append(watcher.close)
            }
            let timer = LoopTimer(loop: loop)
            timer.start(afterMilliseconds: period, repeatMilliseconds: period, upkeep)
            handles.append(timer.close)
            loop.onShutdown { for close in handles { close() } }
        }
    }

    /// The name of the first signal received, waiting for one if none came yet.
    func wait() async -> String {
        await withCheckedContinuation { continuation in
            let received = state.withLock { state -> String? in
                if state.received == nil { state.waiter = continuation }
                return state.received
            }
            if let received { continuation.resume(returning: received) }
        }
    }

    /// Runs `body` (on the signal thread) for every SIGTERM or SIGINT after the
    /// first; at once (on the caller's thread) when one came already.
    func onRepeat(_ body: @escaping @Sendable (String) -> Void) {
        let early = repeated.withLock { state -> String? in
            state.body = body
            defer { state.early = nil }
            return state.early
        }
        if let early { body(early) }
    }

    /// Stops watching (signals take their default action again) and ends the thread.
    func close() { loop.shutdown() }

    private func fire(_ name: String) {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<String, Never>?) in
            let first = state.received == nil
            if first { state.received = name }
            defer { state.waiter = nil }
            return (first, state.waiter)
        }
        waiter?.resume(returning: name)
        guard !first else { return }
        let body = repeated.withLock { state -> (@Sendable (String) -> Void)? in
            if state.body == nil { state.early = name }
            return state.body
        }
        body?(name)
    }
}
