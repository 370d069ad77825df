import HydraLoop
import Foundation
import OrderedCollections
import Synchronization

/// Receives events from the bus. `receive` runs on the emitting thread while
/// the bus delivers in `seq` order, so it must be quick and never block:
/// hand the event to a mailbox, a stream or a buffer.
public protocol EventSink: AnyObject, Sendable {
    func receive(_ event: HydraEvent)
}

/// Assigns the global `seq` and fans events out to subscribers whose filter matches.
///
/// Thread-safe. Delivery happens under the bus lock, so every sink sees events
/// in strictly increasing `seq` whatever thread emitted them. With no
/// subscriber an event costs a counter increment: its fields are never built.
public final class EventBus: Sendable {
    private struct Subscriber {
        let filter: EventFilter
        let sink: any EventSink
    }
    private struct State {
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 1
    }
    private let state: FastLocked<State>
    /// Written under the lock when anyone listens; with no subscriber, by an atomic add alone.
    private let seq: Atomic<UInt64>
    private let subscriberCount = Atomic<Int>(0)

    /// `lastSeq`: the seq of the last event already issued (a restarted server continues after it).
    public init(lastSeq: UInt64 = 0) {
        state = FastLocked(State())
        seq = Atomic(lastSeq)
    }

    /// The seq of the newest event.
    public var lastSeq: UInt64 { seq.load(ordering: .acquiring) }

    /// Returns once no emit is under way: every event issued so far has
    /// reached every sink it was for. Any thread but a sink's.
    public func waitForEmits() { state.withLock { _ in } }

    /// True when someone listens; emitters may skip building an event otherwise.
    public var hasSubscribers: Bool { subscriberCount.load(ordering: .relaxed) > 0 }

    /// Adds a subscriber; returns its id and the seq of the newest event at that
    /// moment (events after it will be delivered).
    public func subscribe(_ filter: EventFilter, sink: any EventSink) -> (id: UInt64, seq: UInt64) {
        state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = Subscriber(filter: filter, sink: sink)
            subscriberCount.store(s.subscribers.count, ordering: .sequentiallyConsistent)
            return (id, seq.load(ordering: .sequentiallyConsistent))
        }
    }

    /// Runs `body` under the bus lock with the newest seq, then subscribes: a
    /// replaying subscriber reads history up to that seq in `body` and misses
    /// nothing after it. `body` must be quick.
    public func subscribe(_ filter: EventFilter, sink: any EventSink,
                          whileHoldingSeq body: (UInt64) -> Void) -> (id: UInt64, seq: UInt64) {
        state.withLock { s in
            body(seq.load(ordering: .sequentiallyConsistent))
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = Subscriber(filter: filter, sink: sink)
            subscriberCount.store(s.subscribers.count, ordering: .sequentiallyConsistent)
            return (id, seq.load(ordering: .sequentiallyConsistent))
        }
    }

    /// Removes a subscriber; false when the id is unknown.
    @discardableResult
    public func unsubscribe(_ id: UInt64) -> Bool {
        state.withLock { s in
            let removed = s.subscribers.removeValue(forKey: id) != nil
            subscriberCount.store(s.subscribers.count, ordering: .relaxed)
            return removed
        }
    }

    /// Issues one event whose fields the emitter has as JSON text: `encoded`
    /// is evaluated only when someone listens, `build` (the same fields as a
    /// tree) only when a sink reads ``HydraEvent/fields``, on its own thread.
    @inline(__always) @discardableResult
    public func emit(_ name: String, jobId: String, rootJobId: String, stepPath: String,
                     encoded: () -> [UInt8], build: @escaping @Sendable () -> OrderedDictionary<String, JSONValue>) -> UInt64 {
        issue { number in
            HydraEvent(seq: number, name: name, jobId: jobId, rootJobId: rootJobId, stepPath: stepPath,
                       time: Date().timeIntervalSince1970, encodedFields: encoded(), build: build)
        }
    }

    /// Issues one event. `fields` is evaluated only when someone listens.
    ///
    /// With no subscriber this is one atomic add: no lock, no allocation. An
    /// emitter racing with the very first `subscribe` may issue its seq without
    /// delivering it to that subscriber; later events are delivered in order.
    /// Returns the event's seq.
    @inline(__always) @discardableResult
    public func emit(_ name: String, jobId: String, rootJobId: String, stepPath: String,
                     fields: () -> OrderedDictionary<String, JSONValue>) -> UInt64 {
        issue { number in
            HydraEvent(seq: number, name: name, jobId: jobId, rootJobId: rootJobId, stepPath: stepPath,
                       time: Date().timeIntervalSince1970, fields: fields())
        }
    }

    /// Takes the next seq; while anyone listens, makes the event with it and
    /// delivers it under the lock, in seq order.
    @inline(__always)
    private func issue(_ make: (UInt64) -> HydraEvent) -> UInt64 {
        if subscriberCount.load(ordering: .relaxed) == 0 {
            return seq.add(1, ordering: .relaxed).newValue
        }
        return state.withLock { s in
            let number = seq.add(1, ordering: .sequentiallyConsistent).newValue
            guard !s.subscribers.isEmpty else { return number }
            let event = make(number)
            for subscriber in s.subscribers.values where subscriber.filter.matches(event) {
                subscriber.sink.receive(event)
            }
            return number
        }
    }
}
