import CUV

/// A `uv_async_t`: the one libuv handle any thread may signal.
///
/// Ownership: the handle keeps this object alive until ``close()`` has run its
/// close callback. ``signal()`` is thread-safe (and coalesces, as libuv does);
/// the callback, ``close()`` and `init` run on the loop thread.
@usableFromInline
final class AsyncHandle: @unchecked Sendable {
    private let handle: UnsafeMutablePointer<uv_async_t>
    private let callback: (AsyncHandle) -> Void

    /// `callback` receives the handle, so it can signal itself again without a reference cycle.
    /// Creates the handle on `loop`. Loop thread only.
    @usableFromInline
    convenience init(loop: EventLoop, callback: @escaping (AsyncHandle) -> Void) {
        self.init(uvLoop: loop.uvLoop, callback: callback)
    }

    init(uvLoop loop: UnsafeMutablePointer<uv_loop_t>, callback: @escaping (AsyncHandle) -> Void) {
        self.callback = callback
        handle = .allocate(capacity: 1)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_async_init(loop, handle) { handle in
            let me = Unmanaged<AsyncHandle>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            me.callback(me)
        }
    }

    /// Wakes the loop; the callback runs there once for any number of signals
    /// sent before it runs. Thread-safe.
    @usableFromInline
    func signal() { uv_async_send(handle) }

    @usableFromInline
    var isClosing: Bool { uv_is_closing(uvHandle(handle)) != 0 }

    /// Closes the handle. Idempotent. Loop thread only.
    @usableFromInline
    func close() {
        guard !isClosing else { return }
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<AsyncHandle>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }
}
