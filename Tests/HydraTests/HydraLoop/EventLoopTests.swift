import Foundation
import Testing

import HydraLoop

/// `EventLoop`'s notion of its own thread.
@Suite(.ownThreads) struct EventLoopTests {
    /// The C library hands an ended thread's id to the next thread it starts.
    /// A loop that kept its ended thread's id took such a thread for its own:
    /// `submitAndWait` ran the work right there, on a thread that does not own
    /// the loop's state, instead of answering the fallback (seen in CI: a
    /// stopped engine answered `status(of:)` from its coordinator's table).
    /// Here the loop's thread ends, then threads start one after another until
    /// one gets its id (the first, with glibc): none may pass for the loop's.
    @Test func aThreadGivenAnEndedLoopThreadsIdIsNotTheLoops() {
        let loop = EventLoop(name: "ended-loop")
        let ended = loop.submitAndWait { pthread_self() }
        loop.shutdown()
        var reused = false
        for _ in 0..<50 where !reused {
            let seen = Locked<(id: pthread_t, inLoop: Bool, answer: Int)?>(nil)
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                let answer = loop.submitAndWait(ifStopped: -1) { 1 }
                seen.withLock { $0 = (pthread_self(), loop.inEventLoop, answer) }
                done.signal()
            }
            // The loop's stack size: the C library keeps an ended thread's stack (its
            // id lives there) for the next thread that asks for that size.
            thread.stackSize = 8 << 20
            thread.start()
            done.wait()
            guard let seen = seen.withLock({ $0 }) else { continue }
            #expect(!seen.inLoop && seen.answer == -1)
            reused = seen.id == ended
            // Let the thread end, so the next one may get its id in turn.
            Thread.sleep(forTimeInterval: 0.002)
        }
        // (Whether an id came back is the C library's business: the checks above
        // hold for every thread; this only says whether the case was met.)
        if !reused { print("EventLoopTests: no thread got the ended loop thread's id in 50 tries") }
    }
}
