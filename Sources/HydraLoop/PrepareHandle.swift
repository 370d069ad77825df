import CUV

/// A `uv_prepare_t`: runs its callback once per loop iteration, before the loop
/// polls for I/O, while started; for work gathered during an iteration and
/// handed on in one piece (``Outbox``, the RPC server's submits). Loop thread
/// only; the handle holds the object until its close callback.
public final class PrepareHandle {
    private let handle: UnsafeMutablePointer<uv_prepare_t>
    @exclusivity(unchecked) private var active = false
    @exclusivity(unchecked) private var closed = false
    /// Runs on the loop thread, once per iteration while started.
    @exclusivity(unchecked) public var callback: (() -> Void)?

    /// Creates a stopped handle on `loop`. Loop thread only.
    public init(loop: EventLoop) {
        handle = .allocate(capacity: 1)
        uv_prepare_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Calls ``callback`` before each wait for I/O until ``stop()``.
    public func start() {
        guard !active, !closed else { return }
        active = true
        uv_prepare_start(handle) { handle in
            Unmanaged<PrepareHandle>.fromOpaque(handle!.pointee.data).takeUnretainedValue().callback?()
        }
    }

    public func stop() {
        guard active else { return }
        active = false
        uv_prepare_stop(handle)
    }

    /// Runs the callback a last time, then closes the handle. Idempotent.
    public func close() {
        guard !closed else { return }
        callback?()  // deliver what is left
        closed = true
        callback = nil
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<PrepareHandle>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }
}
