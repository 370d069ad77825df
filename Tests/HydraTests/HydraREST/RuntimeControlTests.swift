import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// Runtime control of dummy responses (rest.md §6), over the real server.
@Suite(.ownThreads) struct RuntimeControlTests {
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
        // A reply's headers are checked as a request's: a name with CR/LF or a space, a value with a control character.
        for headers: JSONValue in [["a\r\nb": "v"], ["a b": "v"], ["X-A": "v\r\nInjected: 1"]] {
            let refused = error("dummy.set", ["responses": [["endpoint": "/x", "headers": headers]]])
            #expect(refused.0 == -32602 && refused.1.contains("responses[0].headers."), "\(refused)")
        }
        #expect(error("dummy.set", ["responses": "all"]) == (-32602, "responses: expected array of dummy responses"))
        #expect(error("dummy.set", [:]).1.hasPrefix("responses: required"))
        // Each request is matched against the list in turn: it has a bound (a 260 KB line of 10,001 was accepted).
        let many = JSONValue.array(Array(repeating: ["endpoint": "/x"], count: 10_001))
        #expect(error("dummy.set", ["responses": many]) == (-32602, "responses: at most 10000 dummy responses (each request is matched against them in turn)"))
        #expect(error("dummy.enable", ["enabled": "yes"]) == (-32602, "enabled: expected boolean"))
        // A refused list leaves the previous one in place.
        _ = try client.call("dummy.enable", ["enabled": true])
        #expect(try run(items)["result"]?["status"] == 203)
        #expect(try client.call("dummy.set", ["responses": []])["count"] == 0)
        #expect(try run(items)["result"]?["status"] == 200)
    }

    /// rest.md §6: `dummy.set` replaces a runtime list that is asked before the
    /// config's `dummy.responses`: with an entry for the same endpoint in both,
    /// the runtime one answers; `dummy.set []` hands that endpoint back to the
    /// config's entry (which never went away).
    /// Would catch: the runtime list asked after the config's (the config's entry
    /// would go on answering after `dummy.set`); `dummy.set` replacing or hiding
    /// the config's list (nothing would answer after `dummy.set []`, or the network would);
    /// an empty list not replacing the previous one (the runtime entry would stay).
    @Test func theRuntimeListIsAskedBeforeTheConfigsAndAnEmptyOneHandsBack() throws {
        let server = try ServerProcess(config: """
            "dummy": {"enabled": true, "responses": [
              {"server": "testsvr", "endpoint": "/items", "status": 201, "body": {"from": "config"}}]}
            """)
        defer { server.terminate() }
        let client = try server.client()
        func run() throws -> JSONValue {
            let id = try client.call("job.submit", ["job": ["type": "remote", "api": "items"]])["jobId"]!
            let done = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
            #expect(done["state"] == "succeeded", "\(done)")
            return done["result"] ?? .null
        }
        let configured = try run()
        #expect(configured["status"] == 201 && configured["body"] == ["from": "config"], "\(configured)")

        let set = try client.call("dummy.set", ["responses": [
            ["server": "testsvr", "endpoint": "/items", "status": 202, "body": ["from": "runtime"]],
        ]])
        #expect(set["count"] == 1)
        let runtime = try run()
        #expect(runtime["status"] == 202 && runtime["body"] == ["from": "runtime"], "\(runtime)")

        #expect(try client.call("dummy.set", ["responses": []])["count"] == 0)
        let back = try run()
        #expect(back["status"] == 201 && back["body"] == ["from": "config"], "\(back)")
    }

    /// `worker.configure` changes a worker's limits for its next tasks: with
    /// `maxActive` 1, slow requests run one at a time.
    @Test func workerConfigureChangesTheLimitsLive() throws {
        let server = try ServerProcess(config: #""workers": [{"name": "rest", "kind": "remote"}, {"name": "local", "kind": "local"}]"#)
        defer { server.terminate() }
        let client = try server.client()
        let set = try client.call("worker.configure", ["name": "rest", "maxActive": 1, "maxConnections": 4])
        #expect(set["maxActive"] == 1 && set["maxConnections"] == 4 && set["maxHostConnections"] == 16)
        let listed = try client.call("worker.list", [:])["workers"]?.arrayValue?.first { $0["name"] == "rest" }
        #expect(listed?["maxActive"] == 1 && listed?["maxConnections"] == 4)

        var ids: [JSONValue] = []
        for _ in 0..<3 { ids.append(try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/delay/400"]])["jobId"]!) }
        var busiest = 0
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let rest = try client.call("worker.list", [:])["workers"]?.arrayValue?.first { $0["name"] == "rest" }
            busiest = max(busiest, rest?["active"]?.intValue ?? 0)
            if rest?["done"]?.intValue == 3 { break }
            usleep(20_000)
        }
        #expect(busiest == 1)
        for id in ids { #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded") }

        func error(_ params: JSONValue) -> (Int?, String) {
            do { _ = try client.call("worker.configure", params); return (nil, "") } catch { return (error.code, error.message) }
        }
        #expect(error(["name": "nobody", "maxActive": 2]).0 == -32002)
        #expect(error(["name": "rest", "maxActive": 0]).1.contains("maxActive"))
        #expect(error(["name": "local", "maxConnections": 2]).1.contains("maxConnections"))
        #expect(error(["name": "rest", "maxActive": "many"]).0 == -32602)
        #expect(try client.call("worker.configure", ["name": "local", "maxActive": 3])["maxActive"] == 3)
    }

    /// A lower connection limit holds for the next requests (rest.md §6), though
    /// connections opened under the old one sit in the pool: curl would reuse
    /// them whatever the new limit says, so they are retired.
    @Test func aLowerConnectionLimitHoldsForTheNextRequests() throws {
        let server = try ServerProcess(config: #""workers": [{"name": "rest", "kind": "remote"}, {"name": "local", "kind": "local"}]"#)
        defer { server.terminate() }
        let client = try server.client()
        let four: JSONValue = ["type": "concurrent", "steps": .array(Array(repeating: ["type": "remote", "endpoint": "/delay/300"], count: 4))]
        func seconds() throws -> Double {
            let start = Date()
            let id = try client.call("job.submit", ["job": four])["jobId"]!
            #expect(try client.call("job.result", ["jobId": id, "waitMs": 20_000])["state"] == "succeeded")
            return Date().timeIntervalSince(start)
        }
        _ = try seconds()  // four connections now in the pool
        // Lowered while four requests are in flight: they finish on their connections,
        // each reaching the server once (a connection cut under a request makes curl send it again)...
        let key = UUID().uuidString
        let counted: JSONValue = ["type": "concurrent", "steps": .array(Array(
            repeating: ["type": "remote", "endpoint": .string("/hits/\(key)"), "query": ["ms": 300]], count: 4))]
        let inFlight = try client.call("job.submit", ["job": counted])["jobId"]!
        usleep(100_000)
        _ = try client.call("worker.configure", ["name": "rest", "maxHostConnections": 1])
        let finished = try client.call("job.result", ["jobId": inFlight, "waitMs": 20_000])
        #expect(finished["state"] == "succeeded", "\(finished)")
        let hits = try client.call("job.submit", ["job": ["type": "remote", "endpoint": .string("/count/\(key)")]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": hits, "waitMs": 10_000])["result"]?["body"]?["count"] == 4)
        // ...then one connection to the host: the next four requests one after another.
        let serial = try seconds()
        #expect(serial >= 1.15, "four 300 ms requests on one connection took \(serial) s")
    }

    /// The CLI of runtime control: `hydra dummy`, `hydra workers configure`, `hydra emit`.
    @Test func theCommandLineControlsTheServer() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let cli = RunCommandTests()
        let connect = ["--connect", server.address.description]
        let file = server.stateDirectory + "/dummies.json"
        try #"[{"server": "testsvr", "endpoint": "/items", "status": 203, "body": {"dummy": true}}]"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let set = try cli.hydra(["dummy", "set", file] + connect)
        #expect(set.status == 0 && set.out.contains(#""count":1"#), "\(set)")
        #expect(try cli.hydra(["dummy", "enable"] + connect).out.contains(#""ok":true"#))
        let run = try cli.hydra(["submit", "-", "--follow"] + connect, stdin: #"{"type": "remote", "api": "items"}"#)
        #expect(run.out.contains(#""status":203"#), "\(run)")
        #expect(try cli.hydra(["dummy", "disable"] + connect).status == 0)
        let bad = try cli.hydra(["dummy", "set", "-"] + connect, stdin: #"[{"endpoint": "/x", "server": "nowhere"}]"#)
        #expect(bad.status == 2 && bad.err.contains("responses[0].server"))

        let configured = try cli.hydra(["workers", "configure", "rest", "--max-active", "7"] + connect)
        #expect(configured.status == 0 && configured.out.contains(#""maxActive":7"#), "\(configured)")
        #expect(try cli.hydra(["workers", "configure", "rest"] + connect).status == 2)
        let ignored = try cli.hydra(["workers", "pause", "rest", "--max-active", "3"] + connect)
        #expect(ignored.status == 2 && ignored.err.contains("go with configure"), "\(ignored.err)")
        #expect(try cli.hydra(["workers", "configure", "rest", "--max-active", "0"] + connect).status == 2)

        let emitted = try cli.hydra(["emit", "custom.deploy", "--fields", #"{"v": 1}"#] + connect)
        #expect(emitted.status == 0 && emitted.out.contains(#""seq":"#), "\(emitted)")
        #expect(try cli.hydra(["emit", "deploy"] + connect).status == 2)
    }
}

