/// The shared-data slice of the state store: `shared.*` values, each stored
/// with its cipher. Threading as for every slice (see ``StateStore``).
public protocol SharedDataStore: Sendable {
    /// The value under `key`, decrypted or decompressed; nil if absent.
    func sharedValue(_ key: String) throws(StoreError) -> JSONValue?

    /// Stores `value` under `key`, encoded with `cipher`. `done` runs once committed.
    func setShared(_ key: String, value: JSONValue, cipher: SharedCipher,
                   done: @escaping @Sendable (Result<Void, StoreError>) -> Void)

    /// Removes `key`; `done` receives whether it existed.
    func removeShared(_ key: String, done: @escaping @Sendable (Result<Bool, StoreError>) -> Void)

    /// How the value under `key` is stored; nil if absent. A key keeps its
    /// cipher until told otherwise; an aes-gcm value never appears in clear.
    func sharedCipher(_ key: String) -> SharedCipher?

    /// Throws, naming `HYDRA_SHARED_KEY` (`invalidArgument` `cipher`), when
    /// values cannot be stored with `cipher` (aes-gcm without a key), so a
    /// caller can refuse before doing anything else.
    func checkCipher(_ cipher: SharedCipher) throws(StoreError)
}
