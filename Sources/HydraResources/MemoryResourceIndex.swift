import HydraCore
import HydraLoop

/// The resource index of an embedded engine that was given no state store:
/// in memory, behind a lock. It does not survive the process, so the copies a
/// previous run left in the repository are not known to the next one (they
/// are fetched again; a server keeps its index in ``StateStore``). `done`
/// callbacks run on the caller's thread. Thread-safe.
public final class MemoryResourceIndex: ResourceIndexStore {
    private let records = Locked<[String: ResourceRecord]>([:])

    public init() {}

    public func resource(key: String) throws(StoreError) -> ResourceRecord? { records.withLock { $0[key] } }

    public func resources(urlPrefix: String?, after: String?, limit: Int) throws(StoreError) -> [ResourceRecord] {
        let all = records.withLock { Array($0.values) }
            .filter { urlPrefix.map($0.url.hasPrefix) ?? true }
            .sorted { ($0.storedAt, $0.key) > ($1.storedAt, $1.key) }
        var page = all[...]
        if let after, let i = all.firstIndex(where: { $0.key == after }) { page = all[(i + 1)...] }
        return Array(page.prefix(max(0, limit)))
    }

    public func resourcesByUse() throws(StoreError) -> [ResourceRecord] {
        records.withLock { Array($0.values) }.sorted { ($0.lastUsedAt, $0.key) < ($1.lastUsedAt, $1.key) }
    }

    public func storeResource(_ record: ResourceRecord, done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        records.withLock { $0[record.key] = record }
        done?(.success(()))
    }

    public func touchResources(_ keys: [String], at time: Double) {
        records.withLock {
            for key in keys where $0[key] != nil { $0[key]!.lastUsedAt = max($0[key]!.lastUsedAt, time) }
        }
    }

    public func removeResource(_ key: String, ifStoredAt storedAt: Double,
                               done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        let removed = records.withLock { r in
            guard r[key]?.storedAt == storedAt else { return false }
            r[key] = nil
            return true
        }
        done(.success(removed))
    }

    public func removeResources(_ keys: [String], done: @escaping @Sendable (Result<Int, StoreError>) -> Void) {
        let n = records.withLock { r in keys.reduce(0) { $0 + (r.removeValue(forKey: $1) == nil ? 0 : 1) } }
        done(.success(n))
    }
}
