/// Sees the bytes of a response body streamed to a file (``HTTPRequest/saveToFile``)
/// as they are written, so a digest of a large body costs no second read of
/// the file. Called on the transfer's loop thread only; an implementation is
/// confined to that thread (hence `Sendable` only to travel in a request).
public protocol HTTPBodyDigest: AnyObject, Sendable {
    /// More body bytes, in order.
    func update(_ bytes: UnsafeRawBufferPointer)
    /// The file was emptied for a new attempt: forget what was seen.
    func reset()
}
