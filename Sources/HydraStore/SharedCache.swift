import HydraLoop
import HydraCore
import Synchronization

/// Every shared value, decoded, in memory: loaded at open and updated by the
/// writer thread after each commit, so `${shared.KEY}` reads on the
/// coordinator's hot path are a lock and a dictionary lookup. Thread-safe.
final class SharedCache: Sendable {
    /// One key: how it is stored, and its value or why it cannot be read
    /// (an aes-gcm value without the right `HYDRA_SHARED_KEY`, a corrupt row).
    struct Entry: Sendable {
        var cipher: SharedCipher
        var value: Result<JSONValue, StoreError>
    }

    /// nil once the store is closed.
    private let entries: Locked<[String: Entry]?>

    init(_ entries: [String: Entry]) { self.entries = Locked(entries) }

    /// The value under `key`, nil if absent; throws when it could not be
    /// decoded, or once closed.
    func value(_ key: String) throws(StoreError) -> JSONValue? {
        let found: Entry?? = entries.withLock { $0.map { $0[key] } }
        guard let found else { throw StoreWriter.closedError }
        return try found?.value.get()
    }

    /// How `key` is stored; nil if absent.
    func cipher(_ key: String) -> SharedCipher? {
        entries.withLock { $0?[key]?.cipher }
    }

    /// Records a committed write of `key`.
    func set(_ key: String, value: JSONValue, cipher: SharedCipher) {
        entries.withLock { $0?[key] = Entry(cipher: cipher, value: .success(value)) }
    }

    /// Records a committed removal of `key`.
    func remove(_ key: String) {
        _ = entries.withLock { $0?.removeValue(forKey: key) }
    }

    /// Forgets every value: later reads throw "store is closed".
    func close() {
        entries.withLock { $0 = nil }
    }
}
