import HydraCore
import HydraLoop
import HydraServer

/// The single-call `job.submit`s the RPC loop reads in one iteration, from
/// every connection, submitted together just before the loop waits again:
/// sixteen clients' submits become one store write, one wake-up of the
/// store writer and one hand-over to the coordinator instead of sixteen (the
/// calls of one JSON-RPC batch are grouped the same way, by ``SubmitGroup``).
/// Each call keeps its own outcome and reply. RPC loop thread only.
final class SubmitBatcher {
    private let service: HydraService
    private let loop: EventLoop
    private let group = SubmitGroup()
    private let flusher: PrepareHandle

    /// Loop thread.
    init(loop: EventLoop, service: HydraService) {
        self.service = service
        self.loop = loop
        flusher = PrepareHandle(loop: loop)
        flusher.callback = { [unowned self] in self.flush() }
        loop.onShutdown { [flusher] in flusher.close() }
    }

    /// `reply` runs on the loop.
    func add(_ request: HydraService.SubmitRequest, reply: @escaping (Result<JSONValue, ServiceError>) -> Void) {
        group.add(request, reply: reply)
        flusher.start()
    }

    private func flush() {
        flusher.stop()
        group.submit(to: service, loop: loop)
    }
}
