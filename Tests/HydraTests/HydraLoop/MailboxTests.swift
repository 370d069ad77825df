import Foundation
import Testing

import HydraLoop

/// `Mailbox`: closed by its owner, then again by its loop's shutdown hook.
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
}
