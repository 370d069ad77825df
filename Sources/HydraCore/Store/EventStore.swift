/// The events slice of the state store: every event in `seq` order, for
/// `fromSeq` replays and for numbering events on after a restart.
/// Threading as for every slice (see ``StateStore``).
public protocol EventStore: Sendable {
    /// Appends events (already numbered, in `seq` order). Fire and forget.
    func append(_ events: [HydraEvent])

    /// Appends one event (the journal's case: every event as it is emitted).
    func append(_ event: HydraEvent)

    /// Events with `seq > after`, oldest first, at most `limit`. With
    /// `jobId`, only events whose `jobId` or `rootJobId` it is; with `names`,
    /// only events of those names: the store passes over the others without
    /// decoding them (a replay for one job reads the whole history).
    func events(after seq: UInt64, limit: Int, jobId: String?, names: Set<String>?) throws(StoreError) -> [HydraEvent]

    /// The highest `seq` ever appended (0 for a new store).
    func lastSeq() throws(StoreError) -> UInt64

    /// Calls `stored` (on the store's own thread) each time the events
    /// appended so far, up to `upTo`, are written: a server sends live
    /// events only once they are durable (protocol §6: a client that saw an
    /// event finds it again in a replay, even after `kill -9`). Also called
    /// when they could not be written (reported on stderr), so nobody waits
    /// for ever.
    func whenEventsStored(_ stored: @escaping @Sendable (_ upTo: UInt64) -> Void)
}

extension EventStore {
    /// Every event with `seq > after`, oldest first, at most `limit`.
    public func events(after seq: UInt64, limit: Int) throws(StoreError) -> [HydraEvent] {
        try events(after: seq, limit: limit, jobId: nil, names: nil)
    }
}
