import Testing

@testable import HydraCore
@testable import HydraRPC

/// The RPC loop's hold on live events until the store has written them
/// (``EventHold``): every event goes out, in order, and the writer is asked to
/// wake the loop whenever some stay held, whatever the interleaving.
@Suite(.ownThreads) struct EventHoldTests {
    func event(_ seq: UInt64) -> HydraEvent {
        HydraEvent(seq: seq, name: "job.started", jobId: "j", rootJobId: "j", stepPath: "", time: 0, fields: [:])
    }

    /// The writer stores a first batch while a second event waits: the loop,
    /// woken for the first, must ask to be woken again for the second (it was
    /// left held, the loop never woken: a client following a job hung).
    @Test func aPartialWriteLeavesTheLoopWaitingForTheRest() {
        var hold = EventHold(storedUpTo: 10)
        #expect(hold.arrived(event(11)).isEmpty)
        #expect(hold.arrived(event(12)).isEmpty)
        #expect(hold.stored.store(11))  // the writer wakes the loop
        #expect(hold.release().map(\.seq) == [11])
        #expect(hold.stored.store(12), "the loop holds 12 and was not asked for")
        #expect(hold.release().map(\.seq) == [12])
        #expect(hold.isEmpty)
        #expect(!hold.stored.store(13))  // nothing held: no wake-up
    }

    @Test func storedEventsGoOutAtOnceAndInOrder() {
        var hold = EventHold(storedUpTo: 5)
        #expect(hold.arrived(event(4)).map(\.seq) == [4])
        #expect(hold.arrived(event(6)).isEmpty)
        _ = hold.stored.store(7)  // written before its event reached the loop
        #expect(hold.arrived(event(7)).map(\.seq) == [6, 7])
        #expect(hold.isEmpty)
    }

    /// Generated interleavings of arrivals, writes and wake-ups: every event is
    /// delivered once, in seq order, and none stays held once the writer is done.
    @Test func generatedInterleavingsDeliverEverything() {
        var random = SeededRandom(seed: 20261126)
        for _ in 0..<500 {
            var hold = EventHold(storedUpTo: 0)
            var arrived: UInt64 = 0, written: UInt64 = 0
            var wake = false
            var delivered: [UInt64] = []
            while delivered.count < 40 {
                switch random.next() % 3 {
                case 0 where arrived < 40:
                    arrived += 1
                    delivered += hold.arrived(event(arrived)).map(\.seq)
                case 1 where written < arrived:
                    written = min(arrived, written + 1 + random.next() % 3)
                    if hold.stored.store(written) { wake = true }
                default:
                    if wake {
                        wake = false
                        delivered += hold.release().map(\.seq)
                    } else if arrived == 40 && written == 40 && !hold.isEmpty {
                        Issue.record("events held with nothing left to wake the loop: \(delivered.count) delivered")
                        return
                    }
                }
            }
            #expect(delivered == Array(1...40))
        }
    }
}

extension EventHold {
    /// What the loop sends when `event` arrives (``admit(_:)``, then the stored ones), as a list.
    mutating func arrived(_ event: HydraEvent) -> [HydraEvent] {
        admit(event) ? [event] : release()
    }

    /// What the loop sends when the store wrote more (``nextStored()`` until nil), as a list.
    mutating func release() -> [HydraEvent] {
        var out: [HydraEvent] = []
        while let event = nextStored() { out.append(event) }
        return out
    }
}
