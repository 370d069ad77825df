// `hydra-bench serve --config FILE`: the JSON-RPC server of `hydra serve`
// (the same store, service and RPC server, built the same way) inside
// hydra-bench, for counting its instructions per thread with callgrind.
//
// Why not `hydra serve` itself: its async `main` parks the main thread in
// libdispatch's `sigsuspend` once it awaits a signal, and Valgrind 3.19 dies
// there ("the 'impossible' happened", syscall 130). Here the main thread
// blocks in `sigwait` instead. Callgrind's counts hardly move with the
// machine or the minute (but for the writer's, with how its commits batch),
// so a change to the server's per-job path can be measured where its CPU
// time moves with the host by more than the change.
import Foundation
import Hydra
import HydraLoop
import HydraRPC
import HydraServer
import HydraStore

enum ServeBench {
    /// Serves until SIGTERM or SIGINT, then exits at once (unfinished jobs are
    /// left in the state folder, as after a crash).
    static func serve(configPath: String) throws -> Never {
        let configuration = try Configuration.load(path: configPath)
        guard let address = SocketAddress(parsing: configuration.rpc.listen) else {
            FileHandle.standardError.write(Data("rpc.listen: not HOST:PORT\n".utf8))
            exit(2)
        }
        // Blocked before any thread starts, so every thread inherits the mask and sigwait gets them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let statePath = configuration.state.path
        let store = try SQLiteStore(directory: statePath, sync: configuration.state.sync == .full ? .full : .normal)
        let service = try HydraService(configuration: configuration, store: store, stateDirectory: statePath)
        let server = try RPCServer(service: service, addresses: [address], options: configuration.rpc, accepting: false)
        _ = try service.recover()
        server.startAccepting()
        FileHandle.standardError.write(Data("hydra-bench serving on \(server.listening.joined(separator: " and "))\n".utf8))
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.shutdown()
        store.close()
        exit(0)
    }
}
