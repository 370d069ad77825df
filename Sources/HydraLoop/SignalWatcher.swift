import CUV

/// A `uv_signal_t`: a process signal delivered as a callback on one loop.
///
/// Unlike a dispatch signal source, ``start(signal:_:)`` has installed the
/// process-wide handler when it returns, so a signal sent right after can never
/// be lost or take the default action. Ownership: the handle keeps this object
/// alive until ``close()`` has run its close callback. Every method and the
/// callback run on the loop thread only.
public final class SignalWatcher {
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private var callback: ((Int32) -> Void)?
    private var closed = false

    /// Creates a stopped watcher. Loop thread only.
    public init(loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        handle = .allocate(capacity: 1)
        uv_signal_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Watches `number` (SIGTERM, SIGINT, ...): `callback` receives it each time it arrives.
    public func start(signal number: Int32, _ callback: @escaping (Int32) -> Void) {
        loop.preconditionInEventLoop()
        precondition(!closed, "SignalWatcher used after close()")
        self.callback = callback
        uv_signal_start(handle, { handle, number in
            let watcher = Unmanaged<SignalWatcher>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            watcher.callback?(number)
        }, number)
    }

    /// Stops watching for good (the signal's previous disposition returns) and
    /// releases the handle. Idempotent.
    public func close() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        closed = true
        uv_signal_stop(handle)
        callback = nil
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<SignalWatcher>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }
}
