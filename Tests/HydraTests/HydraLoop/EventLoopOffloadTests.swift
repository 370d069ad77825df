import Foundation
import Synchronization
import Testing

import HydraLoop

/// `EventLoop.offload`: blocking work on libuv's thread pool, its answer back
/// on the loop thread, and a loop that does not end before the answer came.
@Suite(.ownThreads) struct EventLoopOffloadTests {
    @Test func workRunsOffTheLoopAndTheAnswerComesBackOnIt() async {
        let loop = EventLoop(name: "offload-test")
        defer { loop.shutdown() }
        let answers: [(value: Int, workOnLoop: Bool, doneOnLoop: Bool)] = await withCheckedContinuation { continuation in
            loop.execute {
                let count = 64
                var got: [(value: Int, workOnLoop: Bool, doneOnLoop: Bool)] = []
                for i in 0..<count {
                    loop.offload({ () -> (Int, Bool) in
                        // Blocking work: sleeps, so a loop running it inline would take 64 × 2 ms.
                        usleep(2000)
                        return (i * i, loop.inEventLoop)
                    }) { result in
                        got.append((value: result.0, workOnLoop: result.1, doneOnLoop: loop.inEventLoop))
                        if got.count == count { continuation.resume(returning: got) }
                    }
                }
            }
        }
        #expect(answers.count == 64)
        #expect(Set(answers.map(\.value)) == Set((0..<64).map { $0 * $0 }))
        #expect(answers.allSatisfy { !$0.workOnLoop }, "work ran on the loop thread")
        #expect(answers.allSatisfy { $0.doneOnLoop }, "an answer came back on another thread")
    }

    @Test func shutdownWaitsForWorkUnderWay() {
        let loop = EventLoop(name: "offload-shutdown")
        let finished = Atomic<Int>(0)
        let started = DispatchSemaphore(value: 0)
        loop.execute {
            loop.offload({ () -> Int in
                started.signal()
                usleep(200_000)
                return 7
            }) { value in
                finished.store(value, ordering: .releasing)
            }
        }
        started.wait()
        // Shutdown begins while the work sleeps: the answer still arrives before the loop ends.
        loop.shutdown()
        #expect(finished.load(ordering: .acquiring) == 7)
    }
}
