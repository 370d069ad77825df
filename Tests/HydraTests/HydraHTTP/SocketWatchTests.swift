import Foundation
import Glibc
import Testing

import HydraLoop
@testable import HydraHTTP

/// ``SocketWatch``'s ownership rule against libcurl's real behaviour: which
/// watches may stay armed while curl does not watch their sockets.
@Suite(.ownThreads) struct SocketWatchTests {
    /// A listener on a loopback port whose backlog is full, so that a connect
    /// to it waits (until the connecting side gives up).
    final class FullBacklog {
        let port: Int
        private let listener: Int32
        private let filler: Int32

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, size) }
            }
            guard bound == 0, listen(listener, 0) == 0 else { throw POSIXError(.EADDRINUSE) }
            var length = size
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
            }
            // One connection fills a backlog of 0; it is never accepted.
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, size) }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
            self.listener = listener
            self.filler = filler
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit {
            close(filler)
            close(listener)
        }
    }

    /// libcurl 7.88 closes a connect attempt it gives up (here: its connect
    /// timeout) without the client's close-socket callback. Its watch, asked
    /// for writing only, must stop on `CURL_POLL_REMOVE` like any watch of a
    /// socket curl closes itself: one left armed outlives its descriptor (it
    /// did, and a start of it still pending in libuv then became an
    /// `epoll_ctl` on a closed number, which libuv answers with `abort()`).
    /// A connection curl has read from stays armed while it idles.
    @Test func aConnectAttemptCurlGivesUpLeavesNoArmedWatch() async throws {
        let backlog = try FullBacklog()
        let loop = EventLoop(name: "watch-test")
        defer { loop.shutdown() }
        let request = HTTPRequest(url: "http://127.0.0.1:\(backlog.port)/", connectTimeoutMilliseconds: 200)
        let idleRequest = HTTPRequest(url: TestServer.url("/items"))
        let (kinds, armedAfterGivingUp, armedAfterAnswer): ([HTTPFailure.Kind?], Int, Int) = await withCheckedContinuation { continuation in
            loop.execute {
                let client = HTTPClient(loop: loop)
                var kinds: [HTTPFailure.Kind?] = []
                var armedAfterGivingUp = -1
                func finish(_ armedAfterAnswer: Int) {
                    client.close()
                    continuation.resume(returning: (kinds, armedAfterGivingUp, armedAfterAnswer))
                }
                do {
                    // Three attempts in turn (the descriptor numbers come back).
                    func attempt(_ left: Int) throws {
                        _ = try client.start(request) { result in
                            if case .failure(let failure) = result { kinds.append(failure.kind) } else { kinds.append(nil) }
                            armedAfterGivingUp = max(armedAfterGivingUp, client.armedIdleWatches)
                            do {
                                if left > 1 { try attempt(left - 1); return }
                                _ = try client.start(idleRequest) { _ in
                                    // After the answer's completion, on the next turn: curl has let the connection go.
                                    let nextTurn = LoopTimer(loop: loop)
                                    nextTurn.start(afterMilliseconds: 0) {
                                        nextTurn.close()
                                        finish(client.armedIdleWatches)
                                    }
                                }
                            } catch {
                                finish(-1)
                            }
                        }
                    }
                    try attempt(3)
                } catch {
                    finish(-1)
                }
            }
        }
        #expect(kinds == [.timeout, .timeout, .timeout], "\(kinds)")
        #expect(armedAfterGivingUp == 0, "a watch of a socket curl closed itself stayed armed")
        #expect(armedAfterAnswer == 1, "the idle connection's watch should stay armed")
    }
}
