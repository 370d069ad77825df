import Foundation
import Synchronization
import Testing

import HydraLoop

/// `ParallelWork.map`: every part runs once, at the same time as the others
/// (not one after another), and the answers come back in order of index.
@Suite(.ownThreads) struct ParallelWorkTests {
    @Test func partsRunAtOnceAndAnswerInOrder() {
        #expect(ParallelWork.map(0) { $0 }.isEmpty)
        #expect(ParallelWork.map(1) { $0 + 41 } == [41])
        // Each part waits until all four have started: run one after another, they never would.
        let started = Atomic<Int>(0)
        let caller = UInt(pthread_self())
        let answers = ParallelWork.map(4) { index -> (index: Int, thread: UInt) in
            started.add(1, ordering: .relaxed)
            let deadline = Date().addingTimeInterval(10)
            while started.load(ordering: .relaxed) < 4 && Date() < deadline { usleep(100) }
            return (index * 10, UInt(pthread_self()))
        }
        #expect(started.load(ordering: .relaxed) == 4)
        #expect(answers.map(\.index) == [0, 10, 20, 30])
        // The first part on the calling thread, each other on a thread of its own.
        #expect(answers[0].thread == caller && Set(answers.map(\.thread)).count == 4)
    }

    /// Ranges cover every index once, in order; the failure is the one of the
    /// lowest failing index, as one pass over all would throw.
    @Test func rangesJoinInOrderAndTheFirstFailureWins() {
        struct Failure: Error, Equatable { let index: Int }
        let all = try? ParallelWork.inParts(10_000, minimumPerPart: 1000) { (range) throws(Failure) -> [Int] in Array(range) }
        #expect(all == Array(0..<10_000))
        #expect(throws: Failure(index: 2500)) {
            try ParallelWork.inParts(10_000, minimumPerPart: 1000) { (range) throws(Failure) -> [Int] in
                for i in range where i == 2500 || i == 9999 { throw Failure(index: i) }
                return Array(range)
            }
        }
        #expect((try? ParallelWork.inParts(3, minimumPerPart: 2) { (range) throws(Failure) -> [Int] in [range.count] }) == [3])
    }

    /// A call made inside a part runs its parts on that part's thread, one
    /// after another: threads are started for the outermost call only.
    @Test func nestedCallsShareABoundedNumberOfThreads() {
        let live = Atomic<Int>(0), peak = Atomic<Int>(0)
        @Sendable func leaf(_ value: Int) -> Int {
            let now = live.add(1, ordering: .relaxed).newValue
            var seen = peak.load(ordering: .relaxed)
            while now > seen, !peak.compareExchange(expected: seen, desired: now, ordering: .relaxed).exchanged {
                seen = peak.load(ordering: .relaxed)
            }
            usleep(2000)
            live.subtract(1, ordering: .relaxed)
            return value
        }
        let answers = ParallelWork.map(8) { outer in
            ParallelWork.map(8) { middle in ParallelWork.map(8) { inner in leaf(outer * 100 + middle * 10 + inner) } }
        }
        let flat: [Int] = answers.flatMap { $0.flatMap { $0 } }
        var expected: [Int] = []
        for o in 0..<8 { for m in 0..<8 { for i in 0..<8 { expected.append(o * 100 + m * 10 + i) } } }
        #expect(flat == expected)
        // The outer call's eight parts at most, whatever runs inside them.
        #expect(peak.load(ordering: .relaxed) <= 8)
        #expect(peak.load(ordering: .relaxed) >= 2, "the outer parts ran at once")
    }

    @Test func partsAreCappedByTheProcessors() {
        #expect(ParallelWork.parts(limit: 1) == 1 && ParallelWork.parts(limit: 0) == 1)
        #expect(ParallelWork.parts(limit: 1000) == ProcessInfo.processInfo.activeProcessorCount)
    }
}
