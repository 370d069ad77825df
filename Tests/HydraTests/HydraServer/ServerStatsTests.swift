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

    /// rest.md §4 over the wire: `hydra.stats` counts `requests.merged`. Five
    /// identical `coalesce` GETs in flight together (the steps of one concurrent
    /// group, the server answering after 2 s): one request on the network,
    /// four merged into it.
    /// Would catch: merged requests missing from `hydra.stats` (the counter not
    /// wired to the server's stats: 0), or counted as requests sent.
    @Test func statsCountMergedRequests() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let key = UUID().uuidString
        let step: JSONValue = ["type": "remote", "endpoint": .string("/hits/\(key)"), "query": ["ms": 2000], "coalesce": true]
        let id = try client.call("job.submit", ["job": ["type": "concurrent", "steps": .array(Array(repeating: step, count: 5))]])["jobId"]!
        let done = try client.call("job.result", ["jobId": id, "waitMs": 20_000])
        #expect(done["state"] == "succeeded", "\(done)")
        // Every step got the one response: the server counted one hit.
        #expect(done["result"]?["results"]?.arrayValue?.allSatisfy { $0["body"]?["hits"] == 1 } == true, "\(done)")
        let stats = try client.call("hydra.stats")
        #expect(stats["requests"]?["merged"] == 4, "\(stats)")
        #expect(stats["requests"]?["sent"] == 1, "\(stats)")
    }
}
