import HydraCore

/// Keeps every event in the events slice of the state store, for `fromSeq`
/// replays and for numbering on after a restart.
///
/// `receive` runs on the emitting thread under the bus lock and only queues
/// the event; the store encodes its fields there, since the one writer
/// thread is the server's bottleneck and the emitting threads are not.
final class StoreEventLog: EventSink {
    let store: any EventStore

    init(store: any EventStore) { self.store = store }

    func receive(_ event: HydraEvent) {
        store.append(event)
    }
}
