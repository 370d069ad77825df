import CUV

extension EventLoop {
    /// Runs blocking `work` (file I/O, hashing, compression) on libuv's
    /// thread pool, then `done` with its result on this loop's thread: the
    /// way a loop hands short work off and gets the answer back without a
    /// lock or a second hop (work that may take long goes to a
    /// ``BlockingPool`` of its owner's, ``offload(to:_:then:)``).
    ///
    /// Threads: `work` on a pool thread (`UV_THREADPOOL_SIZE`, 4 by default,
    /// shared by every loop of the process); `done` on this loop's thread.
    /// Call it on this loop's thread. The loop does not end while work is
    /// queued or running: `done` always runs, also after ``shutdown()`` has
    /// begun (owners that closed meanwhile check for it there).
    public func offload<T: Sendable>(_ work: @escaping @Sendable () -> T, then done: @escaping (T) -> Void) {
        preconditionInEventLoop()
        let job = OffloadedWork(work: work, done: done)
        let request = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(job).toOpaque()
        let status = uv_queue_work(uvLoop, request, { request in
            Unmanaged<OffloadedWork>.fromOpaque(request!.pointee.data).takeUnretainedValue().run()
        }, { request, _ in
            // Never cancelled here (nothing calls uv_cancel), so the work has run.
            let job = Unmanaged<OffloadedWork>.fromOpaque(request!.pointee.data).takeRetainedValue()
            request!.deallocate()
            job.finish()
        })
        precondition(status == 0, "uv_queue_work failed: \(status)")
    }
}

extension EventLoop {
    /// Runs blocking `work` on `pool` (threads of one owner's, not libuv's
    /// shared pool: work that may take long, such as an embedder's code, so it
    /// never holds up the process's file writes and digests), then `done`
    /// with its result on this loop's thread.
    ///
    /// Threads: `work` on a thread of `pool`; `done` on this loop's thread.
    /// Call it on this loop's thread. Unlike ``offload(_:then:)``, the loop
    /// does not wait for the work at shutdown: once the loop has ended, `done`
    /// is dropped (its owner has closed).
    public func offload<T: Sendable>(to pool: BlockingPool, _ work: @escaping @Sendable () -> T,
                                     then done: @escaping (T) -> Void) {
        preconditionInEventLoop()
        let reply = LoopBound(done, loop: self)
        pool.run { [self] in
            let result = work()
            execute { reply.value(result) }
        }
    }
}

/// One ``EventLoop/offload(_:then:)`` request: `run` on a pool thread, then
/// `finish` on the loop thread; libuv orders the two (the pool thread's
/// writes are seen by the loop thread), which makes the unchecked `Sendable` sound.
private final class OffloadedWork: @unchecked Sendable {
    private let work: () -> Void
    private let done: () -> Void

    init<T: Sendable>(work: @escaping @Sendable () -> T, done: @escaping (T) -> Void) {
        let box = Box<T>()
        self.work = { box.value = work() }
        self.done = { done(box.value!) }
    }

    func run() { work() }
    func finish() { done() }

    private final class Box<T> { var value: T? }
}
