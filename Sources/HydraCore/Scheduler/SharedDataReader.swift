/// Reads shared data for `${shared.KEY}` references. Thread-safe.
public protocol SharedDataReader: Sendable {
    func value(forKey key: String) -> JSONValue?
    /// True when the key's value is a secret (stored with aes-gcm): a step
    /// that references it has the value's text masked in its result, its
    /// errors and its events (see ``SecretMask``).
    func isSecret(_ key: String) -> Bool
}

extension SharedDataReader {
    public func isSecret(_ key: String) -> Bool { false }
}
