import HydraLoop
import HydraCore
import OrderedCollections
import Synchronization

/// The REST manager's response cache, kept in the response-cache slice of
/// the state store; emits `cache.updated` and `cache.removed`. Thread-safe.
final class StoreResponseCache: ResponseCache {
    let store: any ResponseCacheStore
    let events: EventRelay

    let keySecret: [UInt8]

    init(store: any ResponseCacheStore, events: EventRelay) {
        self.store = store
        self.events = events
        keySecret = store.credentialKeySecret
    }

    func storedResponse(_ key: String) -> CachedResponse? {
        (try? store.storedResponse(key)) ?? nil
    }

    func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, keep: Double, now: Double) {
        store.storeResponse(key, api: api, value: value, ttl: ttl, keep: keep, now: now)
        events.emit(EventName.cacheUpdated, ["key": .string(key)])
    }

    func invalidate(apis: [String], then done: @escaping @Sendable () -> Void) {
        guard !apis.isEmpty else { return done() }
        let events = self.events
        let left = Atomic(apis.count)
        for api in apis {
            store.removeResponses(api: api, key: nil, prefix: nil) { result in
                // One event per response removed, keyed as its `cache.updated` was.
                if case .success(let keys) = result {
                    for key in keys { events.emit(EventName.cacheRemoved, ["key": .string(key)]) }
                }
                if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done() }
            }
        }
    }
}

/// Emits events on a bus set after construction (the engine, and so its bus,
/// is created after the cache it is given).
final class EventRelay: Sendable {
    let bus = Locked<EventBus?>(nil)

    func emit(_ name: String, _ fields: OrderedDictionary<String, JSONValue>) {
        guard let bus = bus.withLock({ $0 }) else { return }
        bus.emit(name, jobId: "", rootJobId: "", stepPath: "") { fields }
    }
}
