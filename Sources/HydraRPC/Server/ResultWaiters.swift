import HydraCore
import HydraServer
import HydraLoop

/// The `job.result` calls that wait (`waitMs`) for their job to become final.
/// RPC loop thread only.
///
/// Each call is a waiter with an id and a libuv timer. When the wait times
/// out the waiter is removed at once and the call is answered with the job
/// as it stands (so a client polling with `waitMs: 1` leaves nothing
/// behind). The coordinator is asked once per job, not once per call: the
/// first waiter of a job registers one `whenFinished` callback, which stays
/// until the job ends (even after every waiter timed out, so a later waiter
/// on the same job need not register again). Memory is thus bounded by the
/// calls waiting now plus one small entry per unfinished job waited on.
final class ResultWaiters {
    private let loop: EventLoop
    private let service: HydraService
    private typealias Reply = @Sendable (Result<JSONValue, ServiceError>) -> Void

    private struct Waiter {
        /// The connection that asked (its waits end when it closes).
        let session: UInt64
        let reply: Reply
        let timer: ScheduledTask
    }

    /// Waiters by job, each by waiter id. A job's entry lives while its
    /// coordinator callback is registered, possibly with no waiter left.
    private var jobs: [String: [UInt64: Waiter]] = [:]
    private var nextID: UInt64 = 1
    /// `job.result` calls waiting now.
    private(set) var count = 0
    /// Those of each connection (at most ``RPCLimits/maxWaitsPerConnection``).
    private var bySession: [UInt64: Int] = [:]
    /// Jobs with a `whenFinished` callback registered at the coordinator.
    var jobCount: Int { jobs.count }

    init(loop: EventLoop, service: HydraService) {
        self.loop = loop
        self.service = service
    }

    /// Answers with the job's result once it is final, or with its current
    /// state after `milliseconds`, whichever comes first.
    func wait(for jobId: String, milliseconds: Int, session: UInt64,
              reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        loop.preconditionInEventLoop()
        guard bySession[session, default: 0] < RPCLimits.maxWaitsPerConnection else {
            reply(.failure(ServiceError(.overloaded,
                "too many job.result calls waiting on this connection (at most \(RPCLimits.maxWaitsPerConnection)): wait for fewer at once")))
            return
        }
        bySession[session, default: 0] += 1
        let id = nextID
        nextID += 1
        if jobs[jobId] == nil {
            jobs[jobId] = [:]
            let me = LoopBound(self, loop: loop)
            let loop = self.loop
            service.engine.whenFinished(jobId) { result in
                _ = loop.execute { me.value.finished(jobId, result) }
            }
        }
        let timer = loop.schedule(afterMilliseconds: UInt64(milliseconds)) { [unowned self] in
            self.timedOut(jobId, waiter: id)
        }
        jobs[jobId]?[id] = Waiter(session: session, reply: reply, timer: timer)
        count += 1
    }

    /// A connection closed: its waits end unanswered (their timers released),
    /// not at their `waitMs` (up to an hour). The jobs' coordinator callbacks stay
    /// (see above). Walks every wait: connections close far less often than calls come.
    func sessionClosed(_ session: UInt64) {
        guard count > 0 else { return }
        for (jobId, waiters) in jobs {
            for (id, waiter) in waiters where waiter.session == session {
                waiter.timer.cancel()
                jobs[jobId]?[id] = nil
                count -= 1
            }
        }
        bySession[session] = nil
    }

    /// One wait of `session` ended.
    private func ended(_ session: UInt64) {
        if let left = bySession[session], left > 1 { bySession[session] = left - 1 } else { bySession[session] = nil }
    }

    /// A wait timed out: forget the waiter, answer with the job as it is now.
    private func timedOut(_ jobId: String, waiter id: UInt64) {
        guard let waiter = jobs[jobId]?.removeValue(forKey: id) else { return }
        count -= 1
        ended(waiter.session)
        service.result(of: jobId, reply: waiter.reply)
    }

    /// The job is final (`result`), or the coordinator does not know it or
    /// stops (nil: the service then answers from the store).
    private func finished(_ jobId: String, _ result: JobResult?) {
        guard let waiters = jobs.removeValue(forKey: jobId) else { return }
        count -= waiters.count
        for waiter in waiters.values {
            ended(waiter.session)
            waiter.timer.cancel()
            if let result {
                service.whenStored(.success(result.json), waiter.reply)
            } else {
                service.result(of: jobId, reply: waiter.reply)
            }
        }
    }

    /// The server stops: the timers are released; the waiting calls get no
    /// answer (their connections are closing).
    func closeAll() {
        for waiters in jobs.values {
            for waiter in waiters.values { waiter.timer.cancel() }
        }
        jobs.removeAll()
        bySession.removeAll()
        count = 0
    }
}
