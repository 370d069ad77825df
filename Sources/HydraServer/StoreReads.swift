import HydraLoop

/// The one thread the service reads the store on, off every loop: a status or
/// result the engine already forgot, `job.list`, `shared.get`, replay pages.
///
/// Why a thread of its own (a libuv loop fed by a mailbox) rather than
/// global dispatch queues: such a read may wait for the writer to commit
/// (`store.flush()`), and a blocking wait belongs on a thread made for it,
/// not on a shared pool. Reads run one at a time in the order asked; each
/// reply goes wherever its caller said (usually back to the RPC loop).
public final class StoreReads: Sendable {
    private let loop = EventLoop(name: "hydra-reads")

    public init() {}

    /// Runs `work` on the read thread. After ``shutdown()`` the work runs on
    /// the caller's thread instead, so a reply is never lost.
    public func run(_ work: @escaping @Sendable () -> Void) {
        if !loop.execute(work) { work() }
    }

    /// Stops the thread once the reads already asked for are done.
    public func shutdown() { loop.shutdown() }
}
