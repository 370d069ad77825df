import Foundation
import HydraRPC
import Testing

@testable import Hydra

/// `hydra.stats` over the wire: protocol §5's counters (jobs by state,
/// requests, cache hits/misses, retries, connections), each where a client
/// looks first, counted from real requests to the test server.
@Suite(.ownThreads) struct ServerStatsTests {
    @Test func statsNameEveryCounterOfTheProtocol() throws {
        let server = try ServerProcess(config: #""apis": {"counted": {"server": "testsvr", "endpoint": "/hits/:k", "cacheTTL": 60}}"#)
        defer { server.terminate() }
        let client = try server.client()
        func run(_ job: JSONValue) throws -> JSONValue {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            return try client.call("job.result", ["jobId": id, "waitMs": 5000])
        }
        // One retry: two requests on the network.
        let flaky = try run(["type": "remote", "endpoint": .string("/flaky/\(UUID().uuidString)/1"),
                             "retry": ["maxAttempts": 2, "backoffMs": 1]])
        #expect(flaky["state"] == "succeeded")
        #expect(flaky["result"]?["attempts"] == 2)
        // A miss (one request), then a hit (none).
        let counted: JSONValue = ["type": "remote", "api": "counted", "pathVars": ["k": .string(UUID().uuidString)]]
        #expect(try run(counted)["result"]?["fromCache"] == false)
        #expect(try run(counted)["result"]?["fromCache"] == true)
        // A failure, not retried.
        #expect(try run(["type": "remote", "endpoint": "/status/404"])["state"] == "failed")

        let other = try server.client()
        let stats = try client.call("hydra.stats")
        #expect(stats["retries"] == 1)
        #expect(stats["requests"]?["sent"] == 4)
        #expect(stats["requests"]?["retries"] == 1)
        #expect(stats["requests"]?["failed"] == 1)
        #expect(stats["cache"] == ["hits": 1, "misses": 1])
        #expect(stats["connections"] == 2)
        let jobs = try #require(stats["jobs"])
        #expect(jobs["queued"] == 0 && jobs["running"] == 0)
        #expect(jobs["succeeded"] == 3 && jobs["failed"] == 1 && jobs["cancelled"] == 0)
        _ = try other.call("hydra.ping")
    }
}
