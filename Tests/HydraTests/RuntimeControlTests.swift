import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// Runtime control of dummy responses (rest.md §6), over the real server.
@Suite struct RuntimeControlTests {
    @Test func dummySetAndEnableChangeTheNextRequests() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        func run(_ job: JSONValue) throws -> JSONValue {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            return try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        }
        let items: JSONValue = ["type": "remote", "api": "items"]
        #expect(try run(items)["result"]?["body"]?["count"] == 3)

        let set = try client.call("dummy.set", ["responses": [
            ["server": "testsvr", "endpoint": "/items", "status": 203, "body": ["dummy": true]],
        ]])
        #expect(set["count"] == 1)
        // Set but not enabled (the config has none enabled): still the network.
        #expect(try run(items)["result"]?["status"] == 200)
        #expect(try client.call("dummy.enable", ["enabled": true])["ok"] == true)
        let answered = try run(items)
        #expect(answered["result"]?["status"] == 203 && answered["result"]?["body"] == ["dummy": true])
        #expect(try client.call("dummy.enable", ["enabled": false])["ok"] == true)
        #expect(try run(items)["result"]?["status"] == 200)

        func error(_ method: String, _ params: JSONValue) -> (Int?, String) {
            do { _ = try client.call(method, params); return (nil, "") } catch { return (error.code, error.message) }
        }
        #expect(error("dummy.set", ["responses": [["server": "nowhere", "endpoint": "/x"]]]).1.contains("responses[0].server"))
        #expect(error("dummy.set", ["responses": [["status": 200]]]).1.contains("responses[0].endpoint"))
        #expect(error("dummy.set", ["responses": [["endpoint": "/x", "status": 99]]]).1.contains("responses[0].status"))
        #expect(error("dummy.set", ["responses": "all"]).0 == -32602)
        #expect(error("dummy.enable", ["enabled": "yes"]).0 == -32602)
        // A refused list leaves the previous one in place.
        _ = try client.call("dummy.enable", ["enabled": true])
        #expect(try run(items)["result"]?["status"] == 203)
        #expect(try client.call("dummy.set", ["responses": []])["count"] == 0)
        #expect(try run(items)["result"]?["status"] == 200)
    }
}
