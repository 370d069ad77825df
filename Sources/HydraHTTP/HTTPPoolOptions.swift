/// Connection-pool limits of one ``HTTPClient`` (one per remote worker).
public struct HTTPPoolOptions: Sendable {
    /// Open connections in total.
    public var maxConnections: Int
    /// Open connections per host (name + port); more transfers wait inside the pool.
    public var maxHostConnections: Int
    /// Bytes of response bodies the client's transfers may hold in memory
    /// together while they receive them (bodies kept in memory, and spooled
    /// ones before they spill). A transfer that would pass it waits, paused,
    /// until others finish; one at a time may go past it, so that any body
    /// within its own limit (``HTTPRequest/maxBodyBytes``) completes. The
    /// most held is about this plus one such body.
    public var maxBufferedBytes: Int

    /// The default of ``maxBufferedBytes``: 1 GiB, sixteen bodies of
    /// `defaults.maxBodyBytes` (64 MiB) at once.
    public static let defaultMaxBufferedBytes = 1 << 30

    public init(maxConnections: Int = 64, maxHostConnections: Int = 16,
                maxBufferedBytes: Int = HTTPPoolOptions.defaultMaxBufferedBytes) {
        self.maxConnections = maxConnections
        self.maxHostConnections = maxHostConnections
        self.maxBufferedBytes = maxBufferedBytes
    }
}
