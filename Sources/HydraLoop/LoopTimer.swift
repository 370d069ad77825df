import CUV

/// A libuv timer on one loop.
///
/// Ownership: the timer object owns its `uv_timer_t`; the handle keeps the
/// object alive until ``close()`` has run its close callback, so a callback
/// can never reach a freed object. Every method and the callback run on the
/// loop thread only. A timeout of 0 ms means "on the next loop iteration",
/// not 1 ms (libcurl relies on that; rounding it up costs 15× throughput).
public final class LoopTimer {
    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_timer_t>
    @exclusivity(unchecked) private var callback: (() -> Void)?
    @exclusivity(unchecked) private var closed = false

    /// Creates a stopped timer. Loop thread only.
    public init(loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// (Re)starts the timer: `callback` runs once after `milliseconds`,
    /// then every `repeatMilliseconds` if that is not zero.
    public func start(afterMilliseconds milliseconds: UInt64, repeatMilliseconds: UInt64 = 0,
                      _ callback: @escaping () -> Void) {
        loop.preconditionInEventLoop()
        precondition(!closed, "LoopTimer used after close()")
        self.callback = callback
        uv_timer_start(handle, { handle in
            let timer = Unmanaged<LoopTimer>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            timer.callback?()
        }, milliseconds, repeatMilliseconds)
    }

    /// Stops the timer; it may be started again.
    public func stop() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        uv_timer_stop(handle)
        callback = nil
    }

    /// Stops the timer for good and releases its handle. Idempotent.
    public func close() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        closed = true
        uv_timer_stop(handle)
        callback = nil
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<LoopTimer>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }
}

extension EventLoop {
    /// Runs `body` once on the loop thread after `milliseconds`. Loop thread only.
    /// The returned token cancels it; a fired or cancelled one-shot frees its timer.
    @discardableResult
    public func schedule(afterMilliseconds milliseconds: UInt64,
                         _ body: @escaping () -> Void) -> ScheduledTask {
        let timer = LoopTimer(loop: self)
        let task = ScheduledTask(timer: timer)
        timer.start(afterMilliseconds: milliseconds) { [unowned task] in
            task.fire(body)
        }
        return task
    }
}

/// A one-shot timer started by ``EventLoop/schedule(afterMilliseconds:_:)``.
/// Loop thread only.
public final class ScheduledTask {
    private var timer: LoopTimer?

    init(timer: LoopTimer) { self.timer = timer }

    /// Cancels the task if it has not run yet.
    public func cancel() {
        timer?.close()
        timer = nil
    }

    fileprivate func fire(_ body: () -> Void) {
        // Keep self alive for the duration even if the owner drops the token.
        withExtendedLifetime(self) {
            timer?.close()
            timer = nil
            body()
        }
    }
}
