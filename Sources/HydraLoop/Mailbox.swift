import CUV
import Synchronization

/// A thread-safe inbox of typed messages for one loop, drained in batches.
///
/// Any thread may ``send(_:)``; the loop thread receives every pending message,
/// in send order, in one call of the handler per wake-up. Sends coalesce:
/// only the send that finds the inbox empty wakes the loop (`uv_async_send`).
///
/// Ownership: the mailbox's `uv_async_t` belongs to the loop and is closed by
/// ``close()`` or when the loop shuts down; messages sent after that are dropped.
public final class Mailbox<Message: Sendable>: Sendable {
    private let storage: Storage
    private let wakeup: AsyncHandle
    private let loop: EventLoop

    /// Creates a mailbox on `loop`. Loop thread only. `handler` runs on the loop
    /// thread with each drained message.
    public init(loop: EventLoop, handler: @escaping (Message) -> Void) {
        loop.preconditionInEventLoop()
        self.loop = loop
        let storage = Storage()
        self.storage = storage
        wakeup = AsyncHandle(loop: loop.uvLoop) { me in
            if storage.drain(handler) { me.signal() }
        }
        loop.onShutdown { [storage, wakeup] in
            Mailbox.close(storage: storage, wakeup: wakeup, handler: handler)
        }
        self.handler = handler
    }

    /// Loop thread only (it is only called there).
    private nonisolated(unsafe) let handler: (Message) -> Void

    /// Queues `message` for the loop thread. Thread-safe. Returns false when the
    /// mailbox is closed (the message was dropped).
    @discardableResult
    public func send(_ message: Message) -> Bool {
        guard let wake = storage.appendChecked(message) else { return false }
        if wake { wakeup.signal() }
        return true
    }

    /// Queues several messages with at most one wake-up. Thread-safe.
    public func send<S: Sequence>(contentsOf messages: S) where S.Element == Message {
        if storage.append(contentsOf: messages) { wakeup.signal() }
    }

    /// Closes the mailbox: pending messages are delivered first, later sends are dropped.
    /// Loop thread only.
    public func close() {
        loop.preconditionInEventLoop()
        Mailbox.close(storage: storage, wakeup: wakeup, handler: handler)
    }

    private static func close(storage: Storage, wakeup: AsyncHandle, handler: (Message) -> Void) {
        guard !wakeup.isClosing else { return }
        storage.drain(handler)
        storage.close()
        wakeup.close()
    }

    /// The locked message buffer behind a mailbox (also used by ``EventLoop``).
    ///
    /// Wake-ups are suppressed while the consumer is draining: a producer only
    /// signals the loop when the consumer is idle, and the consumer keeps
    /// taking batches until the buffer is empty (at most `maxRounds` per
    /// wake-up, then it signals itself so other handles on the loop, such as
    /// the prepare handle that flushes outboxes, get their turn).
    /// This turns a steady stream of sends into a few wake-ups instead of one
    /// `eventfd` write each.
    final class Storage: Sendable {
        private struct Buffer {
            var pending: [Message] = []
            var spare: [Message] = []
            var closed = false
            var draining = false
        }
        private let buffer = Mutex(Buffer())
        private static var maxRounds: Int { 1 }

        init() {}

        /// Appends; returns true when the caller must wake the loop.
        /// A closed storage drops the message and returns false.
        func append(_ message: Message) -> Bool {
            appendChecked(message) ?? false
        }

        /// Appends; nil when closed, else whether the caller must wake the loop.
        func appendChecked(_ message: Message) -> Bool? {
            buffer.withLock { b -> Bool? in
                if b.closed { return nil }
                b.pending.append(message)
                return b.pending.count == 1 && !b.draining
            }
        }

        func append<S: Sequence>(contentsOf messages: S) -> Bool where S.Element == Message {
            buffer.withLock { b -> Bool in
                if b.closed { return false }
                let wasEmpty = b.pending.isEmpty
                b.pending.append(contentsOf: messages)
                return wasEmpty && !b.pending.isEmpty && !b.draining
            }
        }

        /// Delivers pending messages in order until none are left (or `maxRounds`
        /// batches were taken). Returns true when messages remain and the caller
        /// must wake the loop again. The arrays trade places so their capacity is reused.
        @discardableResult
        func drain(_ handler: (Message) -> Void) -> Bool {
            var batch: [Message] = []
            var rounds = 0
            while true {
                let more = buffer.withLock { b -> Bool in
                    if !batch.isEmpty || batch.capacity > b.spare.capacity { swap(&b.spare, &batch) }
                    if b.pending.isEmpty || rounds == Storage.maxRounds {
                        b.draining = false
                        return false
                    }
                    b.draining = true
                    swap(&b.pending, &b.spare)
                    swap(&b.spare, &batch)
                    return true
                }
                guard more else { break }
                rounds += 1
                for message in batch { handler(message) }
                batch.removeAll(keepingCapacity: true)
            }
            return rounds == Storage.maxRounds && buffer.withLock { !$0.pending.isEmpty }
        }

        func close() {
            buffer.withLock { $0.closed = true; $0.pending.removeAll() }
        }
    }
}
