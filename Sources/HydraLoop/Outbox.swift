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
    /// Messages posted since the last flush, handed over by move (see ``MessageBuffer``).
    @usableFromInline let buffer = MessageBuffer<Message>()
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
        _ = target.send(movingFrom: buffer)
        flusher.stop()
    }
}
