import CUV

/// Messages a loop collects for another loop's ``Mailbox`` and hands over in
/// one batch per loop iteration (flushed in a `uv_prepare` callback, just
/// before the loop would block), so a burst of N messages costs one lock and
/// one wake-up instead of N.
///
/// Ownership: loop-confined (the loop that posts); the prepare handle is
/// closed when that loop shuts down.
public final class Outbox<Message: Sendable> {
    @usableFromInline let loop: EventLoop
    @usableFromInline let target: Mailbox<Message>
    @exclusivity(unchecked) @usableFromInline var buffer: [Message] = []
    @usableFromInline let flusher: PrepareHandle

    /// Creates an outbox on `loop` (loop thread only) delivering to `target`.
    @inlinable
    public init(loop: EventLoop, target: Mailbox<Message>) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.target = target
        flusher = PrepareHandle(loop: loop)
        flusher.callback = { [unowned self] in self.flush() }
        loop.onShutdown { [flusher] in flusher.close() }
    }

    /// Queues `message`; it is sent before this loop next waits for I/O.
    @inlinable
    public func post(_ message: Message) {
        buffer.append(message)
        if buffer.count == 1 { flusher.start() }
    }

    /// Sends everything queued now.
    @inlinable
    public func flush() {
        guard !buffer.isEmpty else { flusher.stop(); return }
        target.send(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
        flusher.stop()
    }
}

/// A `uv_prepare_t`: runs its callback once per loop iteration, before the loop
/// polls for I/O, while started. Loop thread only; the handle holds the object
/// until its close callback.
@usableFromInline
final class PrepareHandle {
    private let handle: UnsafeMutablePointer<uv_prepare_t>
    private var active = false
    private var closed = false
    @usableFromInline var callback: (() -> Void)?

    @usableFromInline
    init(loop: EventLoop) {
        handle = .allocate(capacity: 1)
        uv_prepare_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    @usableFromInline
    func start() {
        guard !active, !closed else { return }
        active = true
        uv_prepare_start(handle) { handle in
            Unmanaged<PrepareHandle>.fromOpaque(handle!.pointee.data).takeUnretainedValue().callback?()
        }
    }

    @usableFromInline
    func stop() {
        guard active else { return }
        active = false
        uv_prepare_stop(handle)
    }

    @usableFromInline
    func close() {
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
