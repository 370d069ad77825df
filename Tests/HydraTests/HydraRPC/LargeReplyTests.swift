import Foundation
import HydraLoop
import Testing

@testable import Hydra
@testable import HydraRPC

/// One reply larger than `rpc.maxOutboundBytes` (a big `job.result`) reaches a
/// client that reads: the cap holds back clients that stop reading, it never
/// answers a request with a closed connection.
@Suite(.ownThreads) struct LargeReplyTests {
    @Test func aResultLargerThanTheOutboundCapIsAnsweredWhole() throws {
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "maxOutboundBytes": 65536, "maxMessageBytes": 16777216}"#)
        defer { server.terminate() }
        let client = try server.client()
        // 6 MB: far over twice the cap, and more than the kernel's socket buffers take at once.
        let big = String(repeating: "0123456789", count: 600_000)
        let job = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .string(big)]])
        let result = try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 10_000], timeout: .seconds(20))
        #expect(result["state"] == "succeeded")
        #expect(result["result"]?.stringValue == big)
        // The connection is still good for the next call.
        #expect(try client.call("hydra.ping")["version"] != nil)
    }
}
