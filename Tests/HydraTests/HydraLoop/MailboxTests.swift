import Foundation
import Synchronization
import Testing

import HydraLoop

/// `Mailbox`: closed by its owner, then again by its loop's shutdown hook;
/// an `Outbox` hands its messages over by move.
@Suite(.ownThreads) struct MailboxTests {
    /// The coordinator closes its inbox, then shuts its loop down, whose hook
    /// closes the mailbox again. By then libuv has run the close callback and
    /// the handle's memory is free: the second close must not read it (it did,
    /// and when the memory had been handed out again, libuv stopped the process
    /// in `uv_close` with "Assertion `0' failed", seen once in `make test`).
    @Test func aMailboxClosedBeforeItsLoopShutsDownIsNotClosedAgain() {
        for round in 0..<20 {
            let loop = EventLoop(name: "mailbox-test")
            let mailbox = loop.submitAndWait { Mailbox<Int>(loop: loop) { _ in } }
            loop.submitAndWait { mailbox.close() }
            // A later loop turn: the close callback has run. Blocks of the sizes
            // around a libuv handle's, zeroed, take the freed memory back from this
            // thread's cache, so what a stale read finds is a handle "never closed".
            let blocks: [UInt] = loop.submitAndWait {
                var taken: [UInt] = []
                for size in stride(from: 64, through: 320, by: 16) {
                    for _ in 0..<4 {
                        let block = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
                        block.initializeMemory(as: UInt8.self, repeating: 0, count: size)
                        taken.append(UInt(bitPattern: block))
                    }
                }
                return taken
            }
            #expect(!mailbox.send(round), "a closed mailbox drops what is sent")
            loop.shutdown()
            for block in blocks { UnsafeMutableRawPointer(bitPattern: block)?.deallocate() }
        }
    }

    /// A message that counts the copies of it freed (a payload retained by a copy and released twice would be freed early).
    final class Payload: Sendable {
        static let freed = Atomic<Int>(0)
        let value: Int
        init(_ value: Int) { self.value = value }
        deinit { Payload.freed.add(1, ordering: .relaxed) }
    }

    /// Messages posted in one loop turn arrive in order, each once, and are
    /// freed once when handled; those posted to a closed mailbox are freed too.
    @Test func anOutboxMovesItsMessagesOverInOrder() {
        let source = EventLoop(name: "outbox-source"), target = EventLoop(name: "outbox-target")
        defer { source.shutdown(); target.shutdown() }
        let received = Locked<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        let mailbox = target.submitAndWait {
            Mailbox<Payload>(loop: target) { payload in
                let count = received.withLock { $0.append(payload.value); return $0.count }
                if count == 3000 { done.signal() }
            }
        }
        let before = Payload.freed.load(ordering: .relaxed)
        let outbox = source.submitAndWait { LoopBound(Outbox(loop: source, target: mailbox), loop: source) }
        for turn in 0..<3 {
            // A thousand in one turn: one flush, one move of all of them.
            source.submitAndWait { for i in 0..<1000 { outbox.value.post(Payload(turn * 1000 + i)) } }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(received.withLock { $0 } == Array(0..<3000))
        // (The last one is freed just after its handler returns.)
        target.submitAndWait {}
        #expect(Payload.freed.load(ordering: .relaxed) - before == 3000)
        target.submitAndWait { mailbox.close() }
        source.submitAndWait {
            outbox.value.post(Payload(-1))
            outbox.value.flush()
        }
        #expect(Payload.freed.load(ordering: .relaxed) - before == 3001, "dropped, and freed, by a closed mailbox")
        // Loop-confined: kept until its loop has stopped (its prepare handle closes with the loop).
        withExtendedLifetime(outbox) { source.shutdown() }
    }
}
