/// Room for a copy's bytes, allocated on the loop that will keep them and
/// filled on a pool thread (``HydraLoop/EventLoop/offload(_:then:)``).
///
/// Ownership: created on the loop thread, then touched only by the one pool
/// thread that runs the work (libuv orders the two), which ``take()``s the
/// array so it is uniquely referenced and fills it in place, without a copy.
final class ReadBackBuffer: @unchecked Sendable {
    private var bytes: [UInt8]

    /// `count` bytes, not zeroed (whoever takes them fills every one).
    init(count: Int) {
        bytes = [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// The array, leaving this buffer empty.
    func take() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &bytes)
        return taken
    }
}
