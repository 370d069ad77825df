import CUV
import Foundation
import Synchronization

/// A thread running one libuv loop.
///
/// Ownership: the loop thread owns the `uv_loop_t` and every handle created on
/// it; only the loop thread may touch them. Other threads talk to the loop by
/// ``execute(_:)`` or through a ``Mailbox``, which are the only thread-safe
/// entry points (they end in `uv_async_send`).
///
/// Lifetime: a loop runs from `init` until ``shutdown()``; shutdown runs the
/// registered shutdown hooks on the loop thread (owners close their handles
/// there), then waits for the thread to finish.
public final class EventLoop: @unchecked Sendable {
    /// The name given at creation, used for the thread name and in diagnostics.
    public let name: String

    // Written once on the loop thread before `ready` is signalled, then read-only.
    private var loopPointer: UnsafeMutablePointer<uv_loop_t>!
    /// The loop thread's id while it runs, 0 before and after: the C library
    /// gives an ended thread's id to the next thread it starts, which must not
    /// pass for this loop's thread (``inEventLoop``) once the loop has ended.
    private let threadID = Atomic<UInt>(0)

    private let inbox: Mailbox<@Sendable () -> Void>.Storage
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let state = Locked(LifecycleState.running)

    /// Loop thread only: hooks run when the loop shuts down, in reverse order of registration.
    private var shutdownHooks: [() -> Void] = []
    private var inboxWakeup: AsyncHandle!

    private enum LifecycleState { case running, stopping, stopped }

    /// Starts a new thread with its own libuv loop. Returns once the loop is ready.
    public init(name: String) {
        self.name = name
        self.inbox = Mailbox<@Sendable () -> Void>.Storage()
        let thread = Thread { [unowned self] in self.threadMain() }
        thread.name = name
        // 8 MiB (reserved, not committed): specs and results nest up to
        // JSONParser.maxDepth levels, and parsing, graph walks and encoding recurse.
        thread.stackSize = 8 << 20
        thread.start()
        ready.wait()
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        pthread_self() == threadID.load(ordering: .relaxed)
    }

    /// Stops with a named failure when called off the loop thread: the check
    /// that turns a thread-confinement bug into an immediate, readable crash.
    @inline(__always)
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "not on the thread of loop \(name)", file: file, line: line)
    }

    /// The raw loop, for the C-wrapper layers of this package (timers, polls, curl).
    /// Loop thread only.
    package var uvLoop: UnsafeMutablePointer<uv_loop_t> {
        preconditionInEventLoop()
        return loopPointer
    }

    /// Runs `work` on the loop thread, soon. Thread-safe; callable from the loop itself.
    /// Returns false when the loop has shut down: the work was dropped.
    /// Work accepted (true) always runs, even when shutdown begins meanwhile.
    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        guard let wake = inbox.append(work) else { return false }
        if wake { inboxWakeup.signal() }
        return true
    }

    /// Runs `work` on the loop thread and waits for its result; `fallback` when
    /// the loop has already shut down. Callable from the loop itself.
    public func submitAndWait<T: Sendable>(ifStopped fallback: @autoclosure () -> T,
                                           _ work: @escaping @Sendable () -> T) -> T {
        if inEventLoop { return work() }
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        let accepted = execute {
            box.value = work()
            done.signal()
        }
        guard accepted else { return fallback() }
        done.wait()
        return box.value!
    }

    /// Runs `work` on the loop thread and waits for its result. Callable from the
    /// loop itself. The loop must be running: calling it after shutdown is a
    /// programming error and stops the process with a message (rather than hang).
    public func submitAndWait<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T {
        let name = self.name
        return submitAndWait(ifStopped: { () -> T in preconditionFailure("loop \(name) has shut down") }(), work)
    }

    /// Registers a hook to run on the loop thread when the loop shuts down,
    /// so an owner can close its handles. Loop thread only.
    public func onShutdown(_ hook: @escaping () -> Void) {
        preconditionInEventLoop()
        shutdownHooks.append(hook)
    }

    /// Runs the shutdown hooks on the loop thread, closes the loop's handles and
    /// waits for the thread to end. Idempotent. Never call it on the loop thread.
    public func shutdown() {
        precondition(!inEventLoop, "EventLoop.shutdown() called on its own thread")
        let first = state.withLock { s -> Bool in
            guard s == .running else { return false }
            s = .stopping
            return true
        }
        if first {
            execute { [unowned self] in self.closeEverything() }
        }
        finished.wait()
        finished.signal()  // let a concurrent second caller through too
    }

    // MARK: - Loop thread

    private func threadMain() {
        threadID.store(pthread_self(), ordering: .relaxed)
        nameCurrentThread(name)
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        precondition(uv_loop_init(loop) == 0, "uv_loop_init failed")
        loopPointer = loop
        inboxWakeup = AsyncHandle(uvLoop: loop) { [unowned self] _ in self.drainInbox() }
        ready.signal()

        uv_run(loop, UV_RUN_DEFAULT)

        // Anything still open here was leaked by its owner: close it so the loop can end.
        uv_walk(loop, { handle, _ in
            if uv_is_closing(handle) == 0 { uv_close(handle, nil) }
        }, nil)
        uv_run(loop, UV_RUN_DEFAULT)
        uv_loop_close(loop)
        loop.deallocate()
        threadID.store(0, ordering: .relaxed)
        state.withLock { $0 = .stopped }
        finished.signal()
    }

    private func drainInbox() {
        if inbox.drain({ work in work() }) { inboxWakeup.signal() }
    }

    private func closeEverything() {
        for hook in shutdownHooks.reversed() { hook() }
        shutdownHooks.removeAll()
        drainInbox()
        for work in inbox.close() { work() }
        inboxWakeup.close()
    }
}

/// A one-slot box to move a value out of a closure run on another thread.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
