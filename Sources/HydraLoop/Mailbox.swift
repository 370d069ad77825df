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
    /// Returns false when the mailbox is closed: nothing was queued.
    @discardableResult
    public func send(contentsOf messages: [Message]) -> Bool {
        guard let wake = storage.append(contentsOf: messages) else { return false }
        if wake { wakeup.signal() }
        return true
    }

    /// As ``send(contentsOf:)-([Message])``, moving the messages out of
    /// `messages` (left empty whether sent or not: a closed mailbox drops them).
    @inlinable
    func send(movingFrom messages: MessageBuffer<Message>) -> Bool {
        guard let wake = storage.append(movingFrom: messages) else {
            messages.removeAll()
            return false
        }
        if wake { wakeup.signal() }
        return true
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
            /// Where producers append.
            @usableFromInline var pending = MessageBuffer<Message>()
            /// The last drained buffer, kept for its capacity (nil while a drain holds it).
            @usableFromInline var spare: MessageBuffer<Message>? = MessageBuffer<Message>()
            @usableFromInline var closed = false
            @usableFromInline var draining = false
            @inlinable init() {}
        }
        @usableFromInline let buffer = FastLocked(Buffer())

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

        /// Appends all; nil when closed, else whether the caller must wake the loop.
        @inlinable
        func append(contentsOf messages: [Message]) -> Bool? {
            buffer.withLock { b -> Bool? in
                if b.closed { return nil }
                if messages.isEmpty { return false }
                let wasEmpty = b.pending.count == 0
                b.pending.append(contentsOf: messages)
                return wasEmpty && !b.draining
            }
        }

        /// Appends all by move (`messages` is left empty); nil when closed
        /// (`messages` untouched), else whether the caller must wake the loop.
        @inlinable
        func append(movingFrom messages: MessageBuffer<Message>) -> Bool? {
            buffer.withLock { b -> Bool? in
                if b.closed { return nil }
                if messages.count == 0 { return false }
                let wasEmpty = b.pending.count == 0
                b.pending.append(movingFrom: messages)
                return wasEmpty && !b.draining
            }
        }

        /// Delivers the messages pending now, in order. Returns true when more
        /// arrived meanwhile and the caller must wake the loop again. The drained
        /// buffer becomes the spare, so its capacity is reused.
        @inlinable
        @discardableResult
        func drain(_ handler: (Message) -> Void) -> Bool {
            let taken = buffer.withLock { b -> MessageBuffer<Message>? in
                guard b.pending.count > 0 else { return nil }
                b.draining = true
                let batch = b.pending
                b.pending = b.spare ?? MessageBuffer()
                b.spare = nil
                return batch
            }
            guard let batch = taken else { return false }
            batch.moveOut(handler)
            return buffer.withLock { b -> Bool in
                b.draining = false
                if batch.capacity > b.spare?.capacity ?? -1 { b.spare = batch }
                return b.pending.count > 0
            }
        }

        /// Refuses later appends and returns what was still pending.
        @inlinable
        func close() -> [Message] {
            buffer.withLock { b -> [Message] in
                b.closed = true
                var rest: [Message] = []
                rest.reserveCapacity(b.pending.count)
                b.pending.moveOut { rest.append($0) }
                return rest
            }
        }
    }
}

/// A growable run of messages in manually managed memory, so a drain can move
/// each message out in order (an `Array` can only give up its elements by copy,
/// or by move from the end).
///
/// Thread safety: a mailbox's buffers are only touched under its lock, or by
/// the one draining thread after the lock handed one over; an ``Outbox``'s
/// buffer only by the outbox's loop thread (while it moves the messages into
/// a mailbox, under that mailbox's lock too). Hence `@unchecked Sendable`.
@usableFromInline
final class MessageBuffer<Message>: @unchecked Sendable {
    @exclusivity(unchecked) @usableFromInline var base: UnsafeMutablePointer<Message>
    @exclusivity(unchecked) @usableFromInline private(set) var count = 0
    @exclusivity(unchecked) @usableFromInline private(set) var capacity: Int

    @inlinable
    init(capacity: Int = 16) {
        base = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    @inlinable
    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    @inlinable
    func append(_ message: Message) {
        if count == capacity { grow(to: count + 1) }
        (base + count).initialize(to: message)
        count += 1
    }

    @inlinable
    func append(contentsOf messages: [Message]) {
        if count + messages.count > capacity { grow(to: count + messages.count) }
        messages.withUnsafeBufferPointer { source in
            guard let from = source.baseAddress else { return }
            (base + count).initialize(from: from, count: source.count)
        }
        count += messages.count
    }

    /// Moves every message of `other` to the end of this buffer, in order;
    /// `other` is empty after (its capacity kept). A move hands each message
    /// over without retaining what it holds and releasing it again (a
    /// worker's reports: a tenth of its work per memory hit went to that copy).
    @inlinable
    func append(movingFrom other: MessageBuffer<Message>) {
        if count + other.count > capacity { grow(to: count + other.count) }
        (base + count).moveInitialize(from: other.base, count: other.count)
        count += other.count
        other.count = 0
    }

    /// Drops every message (capacity kept).
    @inlinable
    func removeAll() {
        base.deinitialize(count: count)
        count = 0
    }

    @inlinable
    var isEmpty: Bool { count == 0 }

    /// Hands each message to `body` by move, in order; the buffer is empty after.
    @inlinable
    func moveOut(_ body: (Message) -> Void) {
        let total = count
        count = 0  // the elements below are moved out one by one: never deinitialized twice
        var i = 0
        while i < total {
            body((base + i).move())
            i += 1
        }
    }

    @inlinable
    func grow(to minimum: Int) {
        let newCapacity = Swift.max(capacity * 2, minimum)
        let fresh = UnsafeMutablePointer<Message>.allocate(capacity: newCapacity)
        fresh.moveInitialize(from: base, count: count)
        base.deallocate()
        base = fresh
        capacity = newCapacity
    }
}
