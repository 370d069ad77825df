/// The events slice of the state store: every event in `seq` order, for
/// `fromSeq` replays and for numbering events on after a restart.
/// Threading as for every slice (see ``StateStore``).
public protocol EventStore: Sendable {
    /// Appends events (already numbered, in `seq` order). Fire and forget.
    func append(_ events: [HydraEvent])

    /// Appends one event (the journal's case: every event as it is emitted).
    func append(_ event: HydraEvent)

    /// Events with `seq > after`, oldest first, at most `limit`.
    func events(after seq: UInt64, limit: Int) throws(StoreError) -> [HydraEvent]

    /// The highest `seq` ever appended (0 for a new store).
    func lastSeq() throws(StoreError) -> UInt64
}
