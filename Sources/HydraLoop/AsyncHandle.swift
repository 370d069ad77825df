import CUV
import Synchronization

/// A `uv_async_t`: the one libuv handle any thread may signal.
///
/// Ownership: this object owns the handle's memory (freed in `deinit`), and
/// the handle keeps the object alive until ``close()`` has run its close
/// callback. Whether it is closed is kept here, not read from the handle: a
/// second ``close()`` (an owner's, then its loop's shutdown hook) or a late
/// ``signal()`` must never touch libuv's state of a handle it has finished
/// with. ``signal()`` is thread-safe (and coalesces, as libuv does); the
/// callback, ``close()`` and `init` run on the loop thread.
@usableFromInline
final class AsyncHandle: @unchecked Sendable {
    private let handle: UnsafeMutablePointer<uv_async_t>
    private let callback: (AsyncHandle) -> Void
    /// Set once by ``close()`` (loop thread), read by ``signal()`` on any thread.
    private let closed = Atomic<Bool>(false)

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

    deinit {
        // Only after the close callback let go of this object (an open handle holds it).
        handle.deallocate()
    }

    /// Wakes the loop; the callback runs there once for any number of signals
    /// sent before it runs. Thread-safe; nothing once closed.
    @usableFromInline
    func signal() {
        guard !closed.load(ordering: .acquiring) else { return }
        uv_async_send(handle)
    }

    @usableFromInline
    var isClosing: Bool { closed.load(ordering: .acquiring) }

    /// Closes the handle. Idempotent. Loop thread only.
    @usableFromInline
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<AsyncHandle>.fromOpaque(handle!.pointee.data).release()
        }
    }
}
