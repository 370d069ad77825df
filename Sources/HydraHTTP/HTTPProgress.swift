/// How far a transfer has come in one direction.
public struct HTTPProgress: Sendable, Equatable {
    /// True for the request body going out, false for the response body coming in.
    public var upload: Bool
    public var bytes: Int64
    /// The expected total when known.
    public var totalBytes: Int64?

    /// Uploads and in-memory downloads smaller than this report no progress.
    public static let threshold: Int64 = 64 << 10

    public init(upload: Bool, bytes: Int64, totalBytes: Int64?) {
        self.upload = upload
        self.bytes = bytes
        self.totalBytes = totalBytes
    }
}
