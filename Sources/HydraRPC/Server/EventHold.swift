import DequeModule
import HydraCore
import Synchronization

/// Live events held on the RPC loop until the store has written them
/// (protocol §6: a client that saw an event finds it again in a replay, even
/// after `kill -9`).
///
/// Two threads meet here: the store's writer records how far it has written
/// (``StoredEvents``, any thread), and the RPC loop holds the events that
/// came before that (``admit(_:)``, ``nextStored()``: loop thread only). The
/// writer wakes the loop only while it holds events, and every time it does
/// the loop either empties the hold or asks to be woken again.
///
/// The loop takes the events out one at a time and sends them between calls:
/// sending may drop the last subscriber, which empties the hold
/// (``removeAll()``), and that must not happen inside a call that is
/// changing it (Swift stops the process on such overlapping access).
struct EventHold {
    let stored: StoredEvents
    private var held = Deque<HydraEvent>()

    init(storedUpTo seq: UInt64) { stored = StoredEvents(seq: seq) }

    var isEmpty: Bool { held.isEmpty }

    /// An event from the bus: true when it may go out now (nothing is held and
    /// the store has it); else it is held, behind the others, for ``nextStored()``.
    mutating func admit(_ event: HydraEvent) -> Bool {
        if held.isEmpty && event.seq <= stored.seq { return true }
        held.append(event)
        return false
    }

    /// The first held event when the store has written it, else nil; then,
    /// while some stay held, the next write wakes the loop (checked again
    /// after asking, since the writer may have written them while the loop was
    /// not listening).
    mutating func nextStored() -> HydraEvent? {
        while let first = held.first {
            if first.seq <= stored.seq { return held.removeFirst() }
            stored.wanted()
            if stored.seq < first.seq { return nil }
        }
        return nil
    }

    /// Forgets the held events (no subscriber wants them any more).
    mutating func removeAll() { held.removeAll() }
}

/// How far the store has written events, shared by the store's writer thread
/// (which records it) and the RPC loop (which holds live events until then).
/// Thread-safe.
final class StoredEvents: Sendable {
    private let written: Atomic<UInt64>
    private let waiting = Atomic<Bool>(false)

    init(seq: UInt64) { written = Atomic(seq) }

    /// Every event up to this seq is in the store.
    var seq: UInt64 { written.load(ordering: .sequentiallyConsistent) }

    /// The loop holds events: the next ``store(_:)`` should wake it.
    func wanted() { waiting.store(true, ordering: .sequentiallyConsistent) }

    /// The writer stored every event up to `seq`; true when the loop waits to hear of it.
    func store(_ seq: UInt64) -> Bool {
        written.store(seq, ordering: .sequentiallyConsistent)
        return waiting.exchange(false, ordering: .sequentiallyConsistent)
    }
}
