import CUV
import Synchronization

/// A thread-safe inbox of typed messages for one loop, drained in batches.
///
/// Any thread may ``send(_:)``; the loop thread receives every pending message,
/// in send order, through the handler. Sends coalesce: only a send that finds
/// the inbox empty while the loop is not already draining it wakes the loop
/// (`uv_async_send`).
///
/// Ownership: the mailbox's `uv_async_t` belongs to the loop and is closed by
/// ``close()`` or when the loop shuts down; messages sent after that are dropped.
///
/// The hot paths are `@inlinable` so they are specialized for each message
/// type in the modules that use them (unspecialized generic code pays a
/// runtime metadata lookup on every array operation).
public final class Mailbox<Message: Sendable>: Sendable {
    @usableFromInline let storage: Storage
    @usableFromInline let wakeup: AsyncHandle
    @usableFromInline let loop: EventLoop
    /// Loop thread only (it is only called there).
    @usableFromInline nonisolated(unsafe) let handler: (Message) -> Void

    /// Creates a mailbox on `loop`. Loop thread only. `handler` runs on the loop
    /// thread with each message.
    @inlinable
    public init(loop: EventLoop, handler: @escaping (Message) -> Void) {
        loop.preconditionInEventLoop()
        self.loop = loop
        let storage = Storage()
        self.storage = storage
        self.handler = handler
        wakeup = AsyncHandle(loop: loop) { me in
            if storage.drain(handler) { me.signal() }
        }
        loop.onShutdown { [storage, wakeup] in
            Mailbox.close(storage: storage, wakeup: wakeup, handler: handler)
        }
    }

    /// Queues `message` for the loop thread. Thread-safe. Returns false when the
    /// mailbox is closed (the message was dropped).
    @inlinable
    @discardableResult
    public func send(_ message: Message) -> Bool {
        guard let wake = storage.append(message) else { return false }
        if wake { wakeup.signal() }
        return true
    }

    /// Queues several messages with at most one wake-up. Thread-safe.
    @inlinable
    public func send(contentsOf messages: [Message]) {
        if storage.append(contentsOf: messages) { wakeup.signal() }
    }

    /// Closes the mailbox: pending messages are delivered first, later sends are dropped.
    /// Loop thread only.
    @inlinable
    public func close() {
        loop.preconditionInEventLoop()
        Mailbox.close(storage: storage, wakeup: wakeup, handler: handler)
    }

    @inlinable
    static func close(storage: Storage, wakeup: AsyncHandle, handler: (Message) -> Void) {
        guard !wakeup.isClosing else { return }
        storage.drain(handler)
        // Messages that raced with the drain are delivered too: a sender told
        // "accepted" must see its message handled.
        for message in storage.close() { handler(message) }
        wakeup.close()
    }

    /// The locked message buffer behind a mailbox (also used by ``EventLoop``).
    ///
    /// Wake-ups are suppressed while the consumer drains: a producer only signals
    /// when the consumer is idle. The consumer takes one batch per wake-up and,
    /// if more arrived meanwhile, signals itself, so other handles on the loop
    /// (the prepare handle that flushes outboxes, timers) get their turn.
    @usableFromInline
    final class Storage: Sendable {
        @usableFromInline
        struct Buffer {
            @usableFromInline var pending: [Message] = []
            @usableFromInline var spare: [Message] = []
            @usableFromInline var closed = false
            @usableFromInline var draining = false
            @inlinable init() {}
        }
        @usableFromInline let buffer = Mutex(Buffer())

        @inlinable init() {}

        /// Appends; nil when closed, else whether the caller must wake the loop.
        @inlinable
        func append(_ message: Message) -> Bool? {
            buffer.withLock { b -> Bool? in
                if b.closed { return nil }
                b.pending.append(message)
                return b.pending.count == 1 && !b.draining
            }
        }

        /// Appends all; returns whether the caller must wake the loop.
        @inlinable
        func append(contentsOf messages: [Message]) -> Bool {
            buffer.withLock { b -> Bool in
                if b.closed || messages.isEmpty { return false }
                let wasEmpty = b.pending.isEmpty
                b.pending.append(contentsOf: messages)
                return wasEmpty && !b.draining
            }
        }

        /// Delivers the messages pending now, in order. Returns true when more
        /// arrived meanwhile and the caller must wake the loop again. The arrays
        /// trade places so their capacity is reused.
        @inlinable
        @discardableResult
        func drain(_ handler: (Message) -> Void) -> Bool {
            var batch: [Message] = []
            let taken = buffer.withLock { b -> Bool in
                guard !b.pending.isEmpty else { return false }
                b.draining = true
                swap(&b.pending, &batch)
                swap(&b.pending, &b.spare)
                return true
            }
            guard taken else { return false }
            // Hand each message over by move, not copy: reversed, `popLast` moves
            // the last element out, which spares a retain and a release per payload.
            batch.reverse()
            while let message = batch.popLast() { handler(message) }
            return buffer.withLock { b -> Bool in
                b.draining = false
                if batch.capacity > b.spare.capacity { swap(&b.spare, &batch) }
                return !b.pending.isEmpty
            }
        }

        /// Refuses later appends and returns what was still pending.
        @inlinable
        func close() -> [Message] {
            buffer.withLock { b -> [Message] in
                b.closed = true
                defer { b.pending.removeAll() }
                return b.pending
            }
        }
    }
}
