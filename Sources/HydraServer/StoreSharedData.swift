import HydraCore

/// `${shared.KEY}` reads for the coordinator, from the shared-data slice of
/// the state store (kept in memory there: a lock and a lookup). Any thread.
final class StoreSharedData: SharedDataReader {
    let store: any SharedDataStore

    init(store: any SharedDataStore) { self.store = store }

    func value(forKey key: String) -> JSONValue? {
        try? store.sharedValue(key)
    }

    func isSecret(_ key: String) -> Bool {
        store.sharedCipher(key) == .aesGCM
    }
}
