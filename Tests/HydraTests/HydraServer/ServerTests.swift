import Foundation
import HydraLoop
import HydraRPC
import Synchronization
import Testing

@testable import Hydra
@testable import HydraResources

/// `hydra serve` as clients see it: the real binary over TCP and Unix sockets.
@Suite(.serialized, .ownThreads) struct ServerTests {
    @Test func pingSubmitStatusResultAndList() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let ping = try client.call("hydra.ping")
        #expect(ping["version"] == .string(HydraVersion.string))
        #expect(ping["uptimeSec"]?.intValue != nil)

        let submitted = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "remote", "api": "items", "id": "items"],
            ["type": "local", "name": "pick", "input": ["from": "${steps.items.body}", "path": "items.1.name"]],
        ]]])
        let jobId = try #require(submitted["jobId"]?.stringValue)
        let result = try client.call("job.result", ["jobId": .string(jobId), "waitMs": 5000])
        #expect(result["state"] == "succeeded")
        #expect(result["result"]?["results"]?[1] == "two")

        let status = try client.call("job.status", ["jobId": .string(jobId)])
        #expect(status["state"] == "succeeded")
        #expect(status["steps"] == ["done": 2, "total": 2])
        #expect(status["createdAt"]?.stringValue?.hasSuffix("Z") == true)

        let list = try client.call("job.list", ["state": "succeeded"])
        #expect(list["jobs"]?[0]?["jobId"] == .string(jobId))

        // The database is its owner's alone (it holds shared values, results, cached responses).
        for name in ["hydra.db", "hydra.db-wal"] {
            var info = stat()
            #expect(stat(server.stateDirectory + "/" + name, &info) == 0 && info.st_mode & 0o077 == 0, "\(name): \(String(info.st_mode, radix: 8))")
        }
    }

    @Test func errorCodesNameTheField() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        func code(_ method: String, _ params: JSONValue) -> (Int?, String) {
            do {
                _ = try client.call(method, params)
                return (nil, "")
            } catch {
                return (error.code, error.message)
            }
        }
        let invalid = code("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "echo"], ["type": "local", "name": "echo"], ["type": "remote", "url": 3]]]])
        #expect(invalid.0 == -32602)
        #expect(invalid.1.contains("job.steps[2].url: expected string"))
        // Protocol §2: a type error's message is exactly PATH: expected TYPE; what was
        // sent instead is in error.data.reason.
        for (job, field, reason): (JSONValue, String, String) in [
            (["type": "serial", "steps": [["type": "local", "name": "echo"], ["type": "local", "name": "echo"],
                                          ["type": "remote", "url": 3]]], "job.steps[2].url", "expected string, got number"),
            (["type": "remote", "url": "http://x/", "headers": ["X-A": [1]]], "job.headers.X-A", "expected string, got array"),
            (["type": "remote", "url": "http://x/", "timeoutMs": "soon"], "job.timeoutMs", "expected integer, got string"),
            (["type": "serial", "steps": 1], "job.steps", "expected array, got number"),
            (["type": "serial", "steps": [["type": "concurrent", "steps": ["x"]]]], "job.steps[0].steps[0]", "expected object, got string"),
        ] {
            do {
                _ = try client.call("job.submit", ["job": job])
                Issue.record("accepted: \(field)")
            } catch {
                #expect(error.code == -32602)
                #expect(error.message == "\(field): \(reason.prefix { $0 != "," })")
                #expect(error.data == ["field": .string(field), "reason": .string(reason)])
            }
        }
        #expect(code("job.submit", [:]).0 == -32602)
        #expect(code("job.status", ["jobId": "nope"]).0 == -32002)
        #expect(code("job.submit", ["job": ["type": "job", "name": "no-such-job"]]).0 == -32002)
        // An unknown worker is not found (protocol §2 lists workers under -32002), named by its path;
        // a worker of the wrong kind exists: an invalid value.
        do {
            _ = try client.call("job.submit", ["job": ["type": "serial", "steps": [
                ["type": "local", "name": "echo"], ["type": "remote", "api": "items", "worker": "nope"]]]])
            Issue.record("an unknown worker was accepted")
        } catch {
            #expect(error.code == -32002)
            #expect(error.message == "job.steps[1].worker: unknown worker 'nope'")
            #expect(error.data == ["field": "job.steps[1].worker", "reason": "unknown worker 'nope'"])
        }
        #expect(code("job.submit", ["job": ["type": "remote", "api": "items", "worker": "local"]])
                    == (-32602, "job.worker: worker 'local' runs local jobs, not remote"))
        #expect(code("no.such.method", [:]).0 == -32601)
        #expect(code("job.list", ["limit": "ten"]).1.contains("limit: expected integer"))
        #expect(code("worker.pause", ["name": "nobody"]).0 == -32002)
        #expect(code("shared.get", ["key": "absent"]).0 == -32002)
        #expect(code("events.unsubscribe", ["subscription": "s999"]).0 == -32002)

        let done = try client.call("job.submit", ["job": ["type": "local", "name": "echo"]])
        _ = try client.call("job.result", ["jobId": done["jobId"]!, "waitMs": 5000])
        #expect(code("job.cancel", ["jobId": done["jobId"]!]).0 == -32003)
        #expect(code("job.cancel", ["jobId": "j-unknown"]).0 == -32002)
        #expect(code("job.list", ["after": "not-a-cursor"]).0 == -32602)
        // input feeds ${input…}; priority is accepted.
        let withInput = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": "${input.a}"],
                                                       "input": ["a": 42], "priority": 5])
        #expect(try client.call("job.result", ["jobId": withInput["jobId"]!, "waitMs": 5000])["result"] == 42)

        // Framing errors over a raw connection: the connection stays open after each.
        let raw = try server.raw()
        #expect(try rawCall(raw, "{not json")["error"]?["code"] == -32700)
        #expect(try rawCall(raw, "[]")["error"]?["code"] == -32600)
        #expect(try rawCall(raw, #"{"jsonrpc":"1.0","id":1,"method":"hydra.ping"}"#)["error"]?["code"] == -32600)
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":"a","method":5}"#)["id"] == "a")
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":7,"method":"hydra.ping"}"# + "\r")["id"] == 7)
    }

    @Test func queueLimitAndASecretFromTheConfigurationFile() throws {
        // (A later "rpc" member replaces the test default's.)
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "secret": "from-the-file"}, "limits": {"maxQueuedJobs": 2}"#)
        defer { server.terminate() }
        let anonymous = try server.client()
        #expect(throws: RPCClientError.self) { try anonymous.call("worker.list") }
        // A notification before auth gets no answer either: the next line is the ping's.
        let raw = try server.raw()
        try raw.send(Array(#"{"jsonrpc":"2.0","method":"worker.list"}"#.utf8))
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":9,"method":"hydra.ping"}"#)["id"] == 9)
        let client = try server.client(secret: "from-the-file")
        _ = try client.call("worker.pause", ["name": "local"])
        _ = try client.call("job.submit", ["job": ["type": "local", "name": "echo"]])
        let first = try client.call("job.submit", ["job": ["type": "local", "name": "echo"], "idempotencyKey": "k1"])["jobId"]
        do {
            _ = try client.call("job.submit", ["job": ["type": "local", "name": "echo"]])
            Issue.record("a submit past limits.maxQueuedJobs was accepted")
        } catch {
            #expect(error.code == -32004)
        }
        // A repeated key takes nothing new: the full queue does not refuse it (protocol §7),
        // in a batch as alone; another spec under it is still a conflict, a new key an overload.
        let again = try client.call("job.submit", ["job": ["type": "local", "name": "echo"], "idempotencyKey": "k1"])
        #expect(again["jobId"] == first && first != nil)
        let raw2 = try server.raw()
        _ = try rawCall(raw2, #"{"jsonrpc":"2.0","id":0,"method":"rpc.auth","params":{"token":"from-the-file"}}"#)
        let batch = try #require(try rawCall(raw2, #"[{"jsonrpc":"2.0","id":1,"method":"job.submit","params":{"job":{"type":"local","name":"echo"},"idempotencyKey":"k1"}},"#
            + #"{"jsonrpc":"2.0","id":2,"method":"job.submit","params":{"job":{"type":"local","name":"echo","input":2},"idempotencyKey":"k1"}},"#
            + #"{"jsonrpc":"2.0","id":3,"method":"job.submit","params":{"job":{"type":"local","name":"echo"},"idempotencyKey":"k2"}}]"#).arrayValue)
        #expect(batch.first { $0["id"] == 1 }?["result"]?["jobId"] == first, "\(batch)")
        #expect(batch.first { $0["id"] == 2 }?["error"]?["code"] == -32003, "\(batch)")
        #expect(batch.first { $0["id"] == 3 }?["error"]?["code"] == -32004, "\(batch)")
        _ = try client.call("worker.resume", ["name": "local"])
        #expect(try client.call("job.result", ["jobId": first!, "waitMs": 10_000])["state"] == "succeeded")

        // A repeat in the same batch as its first submit, which took the last place: the repeat
        // is answered after that insert, so it gets the id too (it heard -32004).
        try waitUntilBlocking(timeout: .seconds(10)) { (try? client.call("hydra.stats"))?["jobs"]?["unfinished"] == 0 }
        _ = try client.call("worker.pause", ["name": "local"])
        _ = try client.call("job.submit", ["job": ["type": "local", "name": "echo"]])
        let same = try #require(try rawCall(raw2, #"[{"jsonrpc":"2.0","id":1,"method":"job.submit","params":{"job":{"type":"local","name":"echo"},"idempotencyKey":"k3"}},"#
            + #"{"jsonrpc":"2.0","id":2,"method":"job.submit","params":{"job":{"type":"local","name":"echo"},"idempotencyKey":"k3"}},"#
            + #"{"jsonrpc":"2.0","id":3,"method":"job.submit","params":{"job":{"type":"local","name":"echo","input":3},"idempotencyKey":"k3"}}]"#).arrayValue)
        let k3 = same.first { $0["id"] == 1 }?["result"]?["jobId"]
        #expect(k3 != nil && same.first { $0["id"] == 2 }?["result"]?["jobId"] == k3, "\(same)")
        #expect(same.first { $0["id"] == 3 }?["error"]?["code"] == -32003, "\(same)")
        _ = try client.call("worker.resume", ["name": "local"])
    }

    @Test func batchesAndNotifications() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let raw = try server.raw()
        let reply = try rawCall(raw, """
            [{"jsonrpc":"2.0","id":1,"method":"hydra.ping"},
             {"jsonrpc":"2.0","method":"hydra.ping"},
             {"jsonrpc":"2.0","id":2,"method":"job.submit","params":{"job":{"type":"local","name":"echo","input":5}}},
             {"jsonrpc":"2.0","id":3,"method":"nope"}, 42]
            """.replacingOccurrences(of: "\n", with: ""))
        let items = try #require(reply.arrayValue)
        #expect(items.count == 4)  // the notification gets no answer
        #expect(items.contains { $0["id"] == 1 && $0["result"]?["version"] != nil })
        #expect(items.contains { $0["id"] == 2 && $0["result"]?["jobId"] != nil })
        #expect(items.contains { $0["id"] == 3 && $0["error"]?["code"] == -32601 })
        #expect(items.contains { $0["id"] == .null && $0["error"]?["code"] == -32600 })
        // All notifications: no answer at all; the next call is answered normally.
        try raw.send(Array(#"[{"jsonrpc":"2.0","method":"hydra.ping"}]"#.utf8))
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":9,"method":"hydra.ping"}"#)["id"] == 9)
    }

    /// The submits of a batch are written together; each still gets its own outcome.
    @Test func submitsInOneBatchKeepTheirOwnOutcomes() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let raw = try server.raw()
        let echo = #"{"type":"local","name":"echo","input":7}"#
        let reply = try rawCall(raw, "[" + [
            #"{"jsonrpc":"2.0","id":1,"method":"job.submit","params":{"job":\#(echo)}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"job.submit","params":{"job":{"type":"remote","url":5}}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"job.submit","params":{"job":\#(echo),"idempotencyKey":"k1"}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"job.submit","params":{"job":\#(echo),"idempotencyKey":"k1"}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"job.submit","params":{"job":{"type":"local","name":"echo","input":8},"idempotencyKey":"k1"}}"#,
            #"{"jsonrpc":"2.0","method":"job.submit","params":{"job":\#(echo)}}"#,
            #"{"jsonrpc":"2.0","id":6,"method":"hydra.ping"}"#,
        ].joined(separator: ",") + "]")
        let items = try #require(reply.arrayValue)
        #expect(items.count == 6)  // not the notification
        func item(_ id: Int) -> JSONValue? { items.first { $0["id"] == .int(id) } }
        let first = try #require(item(1)?["result"]?["jobId"]?.stringValue)
        #expect(item(2)?["error"]?["code"] == -32602)
        #expect(item(2)?["error"]?["data"]?["field"] == "job.url")
        let keyed = try #require(item(3)?["result"]?["jobId"]?.stringValue)
        #expect(keyed != first)
        #expect(item(4)?["result"]?["jobId"] == .string(keyed))  // same key, same spec: the same job
        #expect(item(5)?["error"]?["code"] == -32003)  // same key, another spec
        #expect(item(6)?["result"]?["version"] != nil)
        let client = try server.client()
        for id in [first, keyed] {
            let result = try client.call("job.result", ["jobId": .string(id), "waitMs": 5000])
            #expect(result["state"] == "succeeded")
            #expect(result["result"] == 7)
        }
        // New jobs: calls 1 and 3 and the notification (4 named an existing job).
        let stats = try client.call("hydra.stats")
        #expect(stats["jobs"]?["submitted"] == 3)
    }

    @Test func oversizedMessageClosesOnlyThatConnection() throws {
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "maxMessageBytes": 1024}"#)
        defer { server.terminate() }
        let other = try server.client()
        let raw = try server.raw()
        let reply = try rawCall(raw, #"{"jsonrpc":"2.0","id":1,"method":"hydra.ping","params":{"pad":""# + String(repeating: "x", count: 4096) + "\"}}")
        #expect(reply["error"]?["code"] == -32600)
        #expect(reply["id"] == .null)
        #expect(try raw.readLine(timeout: .seconds(5)) == nil)  // closed
        #expect(try other.call("hydra.ping")["version"] != nil)
        // A client still sending a large line when the server answers reads the answer
        // (not a reset): the server reads the rest away before closing. Ten times.
        for _ in 0..<10 {
            let big = try server.client()
            do {
                _ = try big.call("hydra.ping", ["pad": .string(String(repeating: "x", count: 4 << 20))])
                Issue.record("a 4 MiB line was accepted")
            } catch {
                #expect(error.code == -32600 && error.message.contains("rpc.maxMessageBytes"), "\(error)")
            }
        }
    }

    @Test func authWithSecretFromTheEnvironment() throws {
        let server = try ServerProcess(environment: ["HYDRA_RPC_SECRET": "s3cret-value"])
        defer { server.terminate() }
        let anonymous = try server.client()
        #expect(try anonymous.call("hydra.ping")["version"] != nil)
        #expect(throws: RPCClientError.self) { try anonymous.call("worker.list") }
        do { _ = try anonymous.call("worker.list") } catch { #expect(error.code == -32001) }
        do {
            _ = try anonymous.call("rpc.auth", ["token": "wrong"])
            Issue.record("a wrong token was accepted")
        } catch {
            #expect(error.code == -32001)
            #expect(!error.message.contains("s3cret"))
        }
        // Near misses: a prefix, and the secret padded to a length 256 bytes longer.
        for token in ["s3cret-valu", "s3cret-value" + String(repeating: "\u{0}", count: 256)] {
            #expect(throws: RPCClientError.self) { try anonymous.call("rpc.auth", ["token": .string(token)]) }
        }
        let authed = try server.client(secret: "s3cret-value")
        #expect(try authed.call("worker.list")["workers"]?.arrayValue?.isEmpty == false)
        // Guessing is bounded per connection: the tenth wrong token closes it (after its answer).
        let guesser = try server.client()
        for i in 1...10 {
            do {
                _ = try guesser.call("rpc.auth", ["token": .string("guess-\(i)")])
            } catch {
                #expect(error.code == -32001 && error.message.contains("it closes") == (i == 10), "\(i): \(error)")
            }
        }
        #expect(throws: RPCClientError.self) { try guesser.call("hydra.ping", timeout: .seconds(5)) }
        #expect(try authed.call("hydra.ping")["version"] != nil)
        // The CLI says which variable carries the secret; with it, the call goes through.
        let cli = RunCommandTests()
        let refused = try cli.hydra(["workers", "--connect", server.address.description], environment: ["HYDRA_RPC_SECRET": "wrong"])
        #expect(refused.status == 1 && refused.err.contains("set it to the server's secret") && !refused.err.contains("s3cret"), "\(refused.err)")
        let allowed = try cli.hydra(["workers", "--connect", server.address.description], environment: ["HYDRA_RPC_SECRET": "s3cret-value"])
        #expect(allowed.status == 0, "\(allowed.err)")
        let (status, stderr) = server.terminate()
        #expect(status == 0)
        #expect(!stderr.contains("s3cret"))
    }

    @Test func unixSocketWithMode0600() throws {
        let path = NSTemporaryDirectory() + "hydra-\(UUID().uuidString.prefix(8)).sock"
        let server = try ServerProcess(arguments: ["--unix-socket", path])
        defer { server.terminate() }
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let client = try server.client(address: .unix(path: path))
        #expect(try client.call("hydra.ping")["version"] != nil)
    }

    @Test func idempotencyKeys() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let job: JSONValue = ["type": "local", "name": "echo", "input": 1]
        let first = try client.call("job.submit", ["job": job, "idempotencyKey": "k1"])
        let again = try client.call("job.submit", ["job": job, "idempotencyKey": "k1"])
        #expect(first["jobId"] == again["jobId"])
        // The same spec by value: members in another order, 1.0 for 1.
        let reordered: JSONValue = ["input": 1.0, "name": "echo", "type": "local"]
        #expect(try client.call("job.submit", ["job": reordered, "idempotencyKey": "k1"])["jobId"] == first["jobId"])
        do {
            _ = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 2], "idempotencyKey": "k1"])
            Issue.record("a different spec under the same key was accepted")
        } catch {
            #expect(error.code == -32003)
        }
        // An empty key (an unset variable) would make unrelated jobs one: refused.
        do {
            _ = try client.call("job.submit", ["job": job, "idempotencyKey": ""])
            Issue.record("an empty idempotency key was accepted")
        } catch {
            #expect(error.code == -32602 && error.message == "idempotencyKey: must not be empty", "\(error)")
        }
    }

    @Test func eventsStreamAndReplayWithoutGapOrDuplicate() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let watcher = try server.client()
        let subscribed = try watcher.call("events.subscribe", [:])
        let start = try #require(subscribed["seq"]?.intValue)
        let client = try server.client()
        let submitted = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "echo", "input": 1], ["type": "local", "name": "echo", "input": 2]]]])
        let jobId = try #require(submitted["jobId"])
        _ = try client.call("job.result", ["jobId": jobId, "waitMs": 5000])
        var live: [JSONValue] = []
        while let note = try watcher.nextNotification(timeout: .seconds(2)) {
            live.append(try #require(note["params"]))
            if note["params"]?["event"] == "job.succeeded" && note["params"]?["stepPath"] == "" { break }
        }
        let seqs = live.compactMap { $0["seq"]?.intValue }
        #expect(seqs == Array((start + 1)...(start + seqs.count)))
        #expect(live.first?["event"] == "job.queued")
        #expect(live.allSatisfy { $0["rootJobId"] == jobId && $0["subscription"] != nil })
        #expect(live.contains { $0["event"] == "group.done" })

        // A client that reconnects replays from a seq: the same events, same order.
        let again = try server.client()
        _ = try again.call("events.subscribe", ["jobId": jobId, "fromSeq": .int(start)])
        var replayed: [JSONValue] = []
        while replayed.count < live.count, let note = try again.nextNotification(timeout: .seconds(2)) {
            replayed.append(note["params"]!)
        }
        #expect(replayed.map { $0["seq"] } == live.map { $0["seq"] })
        #expect(try again.nextNotification(timeout: .milliseconds(200)) == nil)
        // job.started names the worker (null for the group, which runs on none),
        // sent live and replayed from the store alike.
        func workers(_ events: [JSONValue]) -> [String: JSONValue] {
            Dictionary(uniqueKeysWithValues: events.filter { $0["event"] == "job.started" }
                .map { ($0["stepPath"]?.stringValue ?? "?", $0["worker"] ?? "absent") })
        }
        #expect(workers(live) == ["": .null, "0": "local", "1": "local"], "\(live)")
        #expect(workers(replayed) == workers(live), "\(replayed)")
        // job.queued carries its spec's summary, live and replayed alike.
        func specs(_ events: [JSONValue]) -> [String: JSONValue] {
            Dictionary(uniqueKeysWithValues: events.filter { $0["event"] == "job.queued" }
                .map { ($0["stepPath"]?.stringValue ?? "?", $0["spec"] ?? "absent") })
        }
        #expect(specs(live)["0"]?["type"] == "local" && specs(live)["0"]?["name"] == "echo", "\(live)")
        #expect(specs(live)[""]?["type"] == "serial", "\(live)")
        #expect(specs(replayed) == specs(live), "\(replayed)")

        // Filters by name.
        let failures = try server.client()
        _ = try failures.call("events.subscribe", ["events": ["job.failed"], "fromSeq": .int(start)])
        #expect(try failures.nextNotification(timeout: .milliseconds(300)) == nil)
    }

    @Test func replayCoversTimeWithoutSubscribersThenGoesLive() throws {
        // With no subscriber the RPC loop takes no events: a replay of that time
        // comes from the store, and live events follow it without gap or duplicate.
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        func run(_ input: Int) throws {
            let submitted = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .int(input)]])
            _ = try client.call("job.result", ["jobId": submitted["jobId"]!, "waitMs": 5000])
        }
        func seqs(_ watcher: RPCClient, _ count: Int) throws -> [Int] {
            var seen: [Int] = []
            while seen.count < count, let note = try watcher.nextNotification(timeout: .seconds(2)) {
                if let seq = note["params"]?["seq"]?.intValue { seen.append(seq) }
            }
            return seen
        }
        let start = try #require(client.call("hydra.stats")["events"]?["lastSeq"]?.intValue)
        try run(1)  // queued, started, succeeded: nobody listens

        let watcher = try server.client()
        let subscribed = try watcher.call("events.subscribe", ["fromSeq": .int(start)])
        #expect(subscribed["seq"]?.intValue == start + 3)
        try run(2)
        #expect(try seqs(watcher, 6) == Array((start + 1)...(start + 6)))

        // Leaving and coming back: the time in between is replayed, then live again.
        _ = try watcher.call("events.unsubscribe", ["subscription": subscribed["subscription"]!])
        try run(3)
        #expect(try watcher.nextNotification(timeout: .milliseconds(200)) == nil)
        _ = try watcher.call("events.subscribe", ["fromSeq": .int(start + 6)])
        try run(4)
        #expect(try seqs(watcher, 6) == Array((start + 7)...(start + 12)))
        #expect(try watcher.nextNotification(timeout: .milliseconds(200)) == nil)

        // A fromSeq ahead of the server: only later events come.
        let ahead = try server.client()
        _ = try ahead.call("events.subscribe", ["fromSeq": .int(start + 14)])
        try run(5)
        #expect(try seqs(ahead, 1) == [start + 15])
        #expect(try ahead.nextNotification(timeout: .milliseconds(200)) == nil)
    }

    @Test func sharedDataCiphersAndReferences() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["shared": ["token", "plain"]])
        _ = try client.call("shared.set", ["key": "plain", "value": ["a": 1], "cipher": "gzip"])
        _ = try client.call("shared.set", ["key": "token", "value": "top-secret-token", "cipher": "aes-gcm"])
        #expect(try client.call("shared.get", ["key": "plain"])["value"] == ["a": 1])
        #expect(try client.call("shared.get", ["key": "token"])["value"] == "top-secret-token")
        let first = try #require(try watcher.nextNotification(timeout: .seconds(2)))
        let second = try #require(try watcher.nextNotification(timeout: .seconds(2)))
        #expect(first["params"]?["value"] == ["a": 1])
        // The envelope's ids are always present (empty outside jobs).
        #expect(first["params"]?["jobId"] == "" && first["params"]?["rootJobId"] == "" && first["params"]?["stepPath"] == "")
        #expect(second["params"]?["key"] == "token")
        #expect(second["params"]?["value"] == nil)  // never emitted for encrypted keys

        // ${shared.KEY} references and the shared.set / shared.get local jobs.
        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "shared.set", "input": ["key": "n", "value": 41]],
            ["type": "local", "name": "echo", "input": "${shared.n}"],
            ["type": "local", "name": "shared.get", "input": ["key": "plain"]]]]])
        let result = try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 5000])
        #expect(result["result"]?["results"]?[1] == 41)
        #expect(result["result"]?["results"]?[2] == ["a": 1])

        #expect(try client.call("shared.remove", ["key": "plain"])["removed"] == true)
        #expect(try client.call("shared.remove", ["key": "plain"])["removed"] == false)
        server.terminate()
        let db = try Data(contentsOf: URL(fileURLWithPath: server.stateDirectory + "/hydra.db"))
        #expect(db.range(of: Data("top-secret-token".utf8)) == nil)
    }

    @Test func aesGCMWithoutAKeyIsRefused() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        do {
            _ = try client.call("shared.set", ["key": "k", "value": "v", "cipher": "aes-gcm"])
            Issue.record("stored without a key")
        } catch {
            #expect(error.code == -32602)
            #expect(error.message.contains("HYDRA_SHARED_KEY"))
        }
        #expect(throws: RPCClientError.self) { try client.call("shared.get", ["key": "k"]) }
        // An existing key: the missing key is what the error names, before
        // anything else (no word of the cipher change), and the value stays.
        _ = try client.call("shared.set", ["key": "g", "value": "old", "cipher": "gzip"])
        do {
            _ = try client.call("shared.set", ["key": "g", "value": "new", "cipher": "aes-gcm"])
            Issue.record("stored without a key")
        } catch {
            #expect(error.code == -32602)
            #expect(error.message.contains("HYDRA_SHARED_KEY"), "\(error.message)")
            #expect(error.data?["field"] == "cipher")
        }
        #expect(try client.call("shared.get", ["key": "g"])["value"] == "old")
    }

    @Test func workersPauseAndResume() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        func local() throws -> JSONValue? {
            try client.call("worker.list")["workers"]?.arrayValue?.first { $0["name"] == "local" }
        }
        _ = try client.call("worker.pause", ["name": "local"])
        // Paused from the moment the call answers.
        #expect(try local()?["state"] == "paused")
        let job = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 1]])
        let waiting = try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 200])
        #expect(waiting["state"] == "queued")
        #expect(waiting["result"] == nil)
        // Without waitMs the answer comes at once.
        #expect(try client.call("job.result", ["jobId": job["jobId"]!], timeout: .seconds(2))["state"] == "queued")
        let workers = try client.call("worker.list")["workers"]?.arrayValue ?? []
        #expect(workers.contains { $0["name"] == "local" && $0["state"] == "paused" && $0["queued"] == 1 })
        let waitingJobs = try client.call("hydra.stats")["jobs"]
        #expect(waitingJobs?["queued"] == 1 && waitingJobs?["running"] == 0)
        _ = try client.call("worker.resume", ["name": "local"])
        #expect(try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 5000])["state"] == "succeeded")
        // Counted before the job's end is heard.
        let after = try local()
        #expect(after?["state"] == "running" && after?["done"] == 1 && after?["queued"] == 0 && after?["active"] == 0)
        let stats = try client.call("hydra.stats")
        #expect(stats["jobs"]?["succeeded"] == 1)
        #expect(stats["jobs"]?["queued"] == 0 && stats["jobs"]?["running"] == 0)
    }

    @Test func cancelAJobInFlight() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/delay/5000", "timeoutMs": 120000]])
        try waitUntilBlocking(timeout: .seconds(10)) {
            (try? client.call("job.status", ["jobId": job["jobId"]!]))?["state"] == "running"
        }
        #expect(try client.call("hydra.stats")["jobs"]?["running"] == 1)
        #expect(try client.call("job.cancel", ["jobId": job["jobId"]!])["cancelled"] == true)
        let result = try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 5000])
        #expect(result["state"] == "cancelled")
    }

    @Test func survivesKill9AndFinishesAcknowledgedJobs() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        // A serial graph: step 0 finishes (a counted hit), step 1 is in flight when the server dies.
        let key = "k9-\(UUID().uuidString.prefix(8))"
        let graph = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "remote", "endpoint": .string("/hits/\(key)")],
            ["type": "remote", "endpoint": "/delay/1500"],
            ["type": "local", "name": "echo", "input": "${prev.body.delayedMs}"]]]])
        var ids: [JSONValue] = [graph["jobId"]!]
        for i in 0..<50 {
            ids.append(try client.call("job.submit", ["job": ["type": "local", "name": "delay", "input": ["ms": .int(100 + i)]]])["jobId"]!)
        }
        let before = try client.call("hydra.stats")["events"]?["lastSeq"]?.intValue ?? 0
        // Killed once the graph's first step is journaled and its second is in flight.
        try waitUntilBlocking(timeout: .seconds(10)) {
            (try? client.call("job.status", ["jobId": graph["jobId"]!]))?["steps"]?["done"] == 1
        }
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        #expect(server.banner[1].contains("resumed"))
        client = try server.client()
        for id in ids {
            let result = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
            #expect(result["state"] == "succeeded", "\(id): \(result)")
        }
        let graphResult = try client.call("job.result", ["jobId": graph["jobId"]!, "waitMs": 10_000])
        #expect(graphResult["result"]?["results"]?[0]?["body"] == ["hits": 1])
        #expect(graphResult["result"]?["results"]?[2] == 1500)
        // Its step finished before the crash counts as done.
        #expect(try client.call("job.status", ["jobId": graph["jobId"]!])["steps"] == ["done": 3, "total": 3])
        // The finished step was not run again: the server counted one hit.
        let count = try client.call("job.result", ["jobId": client.call("job.submit", ["job": [
            "type": "remote", "endpoint": .string("/count/\(key)")]])["jobId"]!, "waitMs": 5000])
        #expect(count["result"]?["body"] == ["count": 1])
        let after = try client.call("hydra.stats")["events"]?["lastSeq"]?.intValue ?? 0
        #expect(after > before)

        // Replayed across the crash, each job and step tells its story once:
        // queued < started < one final event, nothing sent again by the resumed run.
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["fromSeq": 0])
        var stories: [String: [String]] = [:]
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) {
            guard let event = note["params"], let name = event["event"]?.stringValue,
                  let jobId = event["jobId"]?.stringValue, ids.contains(.string(jobId)) else { continue }
            stories[jobId + " " + (event["stepPath"]?.stringValue ?? "?"), default: []].append(name)
        }
        #expect(stories.count == ids.count + 3)  // each job, and the graph's three steps
        let finals: Set<String> = ["job.succeeded", "job.failed", "job.cancelled"]
        for (step, names) in stories {
            #expect(names.first == "job.queued" && names.filter { $0 == "job.queued" }.count == 1, "\(step): \(names)")
            #expect(names.filter { $0 == "job.started" }.count == 1, "\(step): \(names)")
            #expect(names.filter(finals.contains).count == 1 && finals.contains(names.last ?? ""), "\(step): \(names)")
        }
    }

    @Test func badConfigAndAddressInUseExitTwo() throws {
        let bad = NSTemporaryDirectory() + "hydra-bad-\(UUID().uuidString).json"
        try #"{"rpc": {"listn": "x"}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let run = try RunCommandTests().hydra(["serve", "--config", bad])
        #expect(run.status == 2)
        #expect(run.err.contains(bad))
        #expect(run.err.contains("rpc.listn"))
        #expect(run.err.split(separator: "\n").count == 1)
        // A grace period that is no number of seconds is refused at start (nan and inf trapped at SIGTERM).
        for grace in ["nan", "inf", "1e300", "-1"] {
            let refused = try RunCommandTests().hydra(["serve", "--grace=\(grace)", "--config", bad])
            #expect(refused.status == 2 && refused.err.contains("--grace"), "\(grace): \(refused.err)")
        }
        // Each mistake named with the file and its key path, on one line.
        for (text, key) in [(#"{"workers": []}"#, "workers"), (#"{"rpc": {"secret": ""}}"#, "rpc.secret"),
                            (#"{"rpc": {"listen": "nowhere"}}"#, "rpc.listen"),
                            (#"{"defaults": {"dogma": "jsn"}}"#, "defaults.dogma"),
                            // A size whose double (the disconnect bound) overflowed: a crash at the first reply.
                            (#"{"rpc": {"maxOutboundBytes": 4611686018427387904}}"#, "rpc.maxOutboundBytes"),
                            // A misspelt required key is named, not the key it stands for.
                            (#"{"workers": [{"name": "a", "knd": "remote"}]}"#, "workers[0].knd: unknown key (did you mean 'kind'?)"),
                            (#"{"servers": {"s": {"ulr": "http://h"}}}"#, "servers.s.ulr: unknown key (did you mean 'url'?)"),
                            (#"{"servers": {"s": "http://"}}"#, "servers.s"),
                            (#"{"jobs": {"path": ""}}"#, "jobs.path"),
                            (#"{"auth": {"a": {"type": "oauth2-client-credentials", "tokenUrl": "http://", "clientId": "x"}}}"#,
                             "auth.a.tokenUrl")] {
            try text.write(toFile: bad, atomically: true, encoding: .utf8)
            let refused = try RunCommandTests().hydra(["serve", "--config", bad])
            #expect(refused.status == 2)
            #expect(refused.err.contains("\(bad): \(key)"), "\(refused.err)")
            #expect(refused.err.split(separator: "\n").count == 1)
        }

        // A socket in a folder that is not there: said so (bind said "permission denied").
        let missingFolder = NSTemporaryDirectory() + "hydra-nofolder-\(UUID().uuidString)"
        let noFolder = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:0", "--unix-socket", missingFolder + "/h.sock",
                                                    "--state", NSTemporaryDirectory() + "hydra-nofolder-state-\(UUID().uuidString)"])
        #expect(noFolder.status == 2 && noFolder.err.contains("the folder \(missingFolder) does not exist"), "\(noFolder.err)")
        // HYDRA_SHARED_KEY set but empty: a mistake (as for HYDRA_RPC_SECRET), not "no key".
        let emptyKey = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:0", "--state",
                                                    NSTemporaryDirectory() + "hydra-emptykey-\(UUID().uuidString)"],
                                                   environment: ["HYDRA_SHARED_KEY": ""])
        #expect(emptyKey.status == 2 && emptyKey.err.contains("HYDRA_SHARED_KEY is set but empty"), "\(emptyKey.err)")
        // A key given twice: the one that would silently win is named with its place.
        try "{\"limits\": {\"maxQueuedJobs\": 1},\n \"limits\": {\"maxResultBytes\": 1024}}"
            .write(toFile: bad, atomically: true, encoding: .utf8)
        let twice = try RunCommandTests().hydra(["serve", "--config", bad])
        #expect(twice.status == 2 && twice.err.contains(#"\#(bad):2:2: not JSON: the key "limits" is repeated"#), "\(twice.err)")

        let server = try ServerProcess()
        defer { server.terminate() }
        let port: Int
        if case .tcp(_, let p) = server.address! { port = p } else { port = 0 }
        let state = NSTemporaryDirectory() + "hydra-inuse-\(UUID().uuidString)"
        let inUse = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:\(port)", "--state", state])
        #expect(inUse.status == 2)
        #expect(inUse.err.contains("127.0.0.1:\(port)"))
        #expect(inUse.err.contains("in use"))

        let open = try RunCommandTests().hydra(["serve", "--listen", "0.0.0.0:0", "--state", state])
        #expect(open.status == 2)
        #expect(open.err.contains("rpc.secret"))
        #expect(open.err.contains("--listen"))

        // One server per state folder: a second one on the running server's folder stops at once.
        let twin = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:0", "--state", server.stateDirectory])
        #expect(twin.status == 2)
        #expect(twin.err.contains("state.path") && twin.err.contains("in use by another hydra process (pid "), "\(twin.err)")
        // An empty secret in the environment is a mistake, as an empty rpc.secret is.
        let emptySecret = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:0", "--state", state],
                                                      environment: ["HYDRA_RPC_SECRET": ""])
        #expect(emptySecret.status == 2 && emptySecret.err.contains("HYDRA_RPC_SECRET"), "\(emptySecret.err)")
        #expect(try RunCommandTests().hydra(["serve", "--state", ""]).status == 2)

        // A passphrase too short is named as such, not taken for a state folder problem.
        do {
            let refused = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "short"])
            refused.terminate()
            Issue.record("a 5-character HYDRA_SHARED_KEY was accepted")
        } catch let failure as ServerStartFailure {
            #expect(failure.status == 2)
            #expect(failure.stderr.hasPrefix("hydra: HYDRA_SHARED_KEY"), "\(failure.stderr)")
        }
    }

    /// Waits until the server has handled a SIGTERM: until then a probe is
    /// accepted (an `echo` job, done at once); from then on it hears -32005.
    /// (Without an idempotency key: a repeated key keeps its job's id while the
    /// server stops.)
    func waitUntilShuttingDown(_ client: RPCClient) throws {
        try waitUntilBlocking(timeout: .seconds(10)) {
            do {
                _ = try client.call("job.submit", ["job": ["type": "local", "name": "echo"]])
                return false
            } catch {
                return (error as? RPCClientError)?.code == -32005
            }
        }
    }

    @Test func gracefulShutdownRefusesNewWorkAndExitsZero() throws {
        let server = try ServerProcess(arguments: ["--grace", "5"])
        let client = try server.client()
        // Long enough to still be running when the second submit arrives, even on a loaded machine
        // (with 500 ms, one full-suite run in a dozen saw the server already gone: a closed connection).
        let job = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/delay/2000"], "idempotencyKey": "before"])
        // Running before the signal (a job still queued then waits for the next start).
        try waitUntilBlocking(timeout: .seconds(10)) {
            (try? client.call("job.status", ["jobId": job["jobId"]!]))?["state"] == "running"
        }
        let other = try server.client()
        kill(server.process.processIdentifier, SIGTERM)
        try waitUntilShuttingDown(other)
        // Both a connection opened before the signal and one opened after it hear -32005.
        let late = try server.client()
        // A repeat of a job taken before the signal still gets its id (protocol §7); a new key hears -32005.
        #expect(try late.call("job.submit", ["job": ["type": "remote", "endpoint": "/delay/2000"], "idempotencyKey": "before"])["jobId"]
                == job["jobId"])
        do {
            _ = try late.call("job.submit", ["job": ["type": "local", "name": "echo"], "idempotencyKey": "after"])
            Issue.record("a new idempotency key was accepted while shutting down")
        } catch {
            #expect(error.code == -32005, "\(error)")
        }
        for connection in [other, late] {
            do {
                _ = try connection.call("job.submit", ["job": ["type": "local", "name": "echo"]])
                Issue.record("accepted work while shutting down")
            } catch {
                #expect(error.code == -32005, "\(error)")
            }
        }
        // Queries still work during the grace period.
        let state = try late.call("job.status", ["jobId": job["jobId"]!])["state"]
        #expect(state == "running", "\(String(describing: state))")
        let (status, _) = server.waitForExit()  // (not a second signal: that would end the grace period)
        #expect(status == 0)
        // The job that was running finished and its result was kept.
        let restarted = try ServerProcess(state: server.stateDirectory)
        defer { restarted.terminate() }
        let result = try restarted.client().call("job.result", ["jobId": job["jobId"]!])
        #expect(result["state"] == "succeeded")
    }

    /// A second SIGTERM ends the grace period at once: the running job is
    /// kept, unfinished, and resumes at the next start.
    @Test func aSecondSignalStopsAtOnceAndKeepsTheRunningJob() throws {
        let server = try ServerProcess(arguments: ["--grace", "60"])
        let client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/delay/3000"]])
        kill(server.process.processIdentifier, SIGTERM)
        try waitUntilShuttingDown(client)
        let sent = ContinuousClock.now
        kill(server.process.processIdentifier, SIGTERM)
        let (status, stderr) = server.waitForExit()
        #expect(status == 0)
        #expect(ContinuousClock.now - sent < .seconds(10), "the second signal did not cut the 60 s grace period")
        #expect(stderr.contains("SIGTERM again: stopping now") && stderr.contains("resume at the next start"), "\(stderr)")
        let restarted = try ServerProcess(state: server.stateDirectory)
        defer { restarted.terminate() }
        #expect(restarted.banner.joined().contains("1 unfinished job resumed"), "\(restarted.banner)")
        let result = try restarted.client().call("job.result", ["jobId": job["jobId"]!, "waitMs": 10000])
        #expect(result["state"] == "succeeded")
    }

    /// A supervisor may stop the server the moment it prints where it listens.
    @Test func aSignalRightAfterTheBannerIsNeverLost() throws {
        for _ in 0..<5 {
            let server = try ServerProcess()
            #expect(server.terminate(within: .seconds(10)) == 0)
        }
    }

    @Test func aClientThatStopsReadingLosesItsSubscriptionsOthersKeepFullSpeed() throws {
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "maxOutboundBytes": 262144}"#)
        defer { server.terminate() }
        let stalled = try server.client()
        _ = try stalled.call("events.subscribe", [:])  // then never reads
        let watcher = try server.client()
        // The reading subscriber takes the small events (it must not be slower than the
        // server writes: a debug-build reader parsing 60 KB events can be).
        _ = try watcher.call("events.subscribe", ["events": ["job.started"]])
        // The watcher reads as events come, on a thread of its own.
        let seen = Locked(0)
        let reading = Thread {
            while seen.withLock({ $0 }) < 128, let note = try? watcher.nextNotification(timeout: .seconds(10)) {
                if note["params"]?["event"] == "job.started", note["params"]?["stepPath"] == "" {
                    seen.withLock { $0 += 1 }
                }
            }
        }
        reading.start()
        let client = try server.client()
        // About 16 MB of events for the stalled client: far more than socket buffers hold.
        let big = String(repeating: "x", count: 60_000)
        let started = ContinuousClock.now
        var ids: [JSONValue] = []
        for _ in 0..<128 {
            ids.append(try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .string(big)]])["jobId"]!)
        }
        for id in ids { _ = try client.call("job.result", ["jobId": id, "waitMs": 10_000]) }
        try waitUntilBlocking(timeout: .seconds(10)) { seen.withLock { $0 } == 128 }
        #expect(seen.withLock { $0 } == 128)
        // (A sanitized build runs every part of this several times slower: 26 s once under ASan.)
        #expect(ContinuousClock.now - started < (BuiltProducts.sanitized ? .seconds(120) : .seconds(20)))
        let stats = try client.call("hydra.stats")
        #expect(stats["subscriptions"] == 1)  // the stalled client's subscription was dropped
        // When the stalled client reads at last, it finds the drop notice.
        var dropped = false
        while let note = try stalled.nextNotification(timeout: .seconds(2)) {
            if note["method"] == "hydra.dropped" { dropped = true; break }
        }
        #expect(dropped)
    }

    /// Events larger than twice `rpc.maxOutboundBytes`: a subscriber that
    /// reads gets every one (what a loop turn queued is offered to the kernel
    /// before the backlog is judged: one such event dropped it); one that does
    /// not read hears `hydra.dropped` and keeps its connection (the notice that
    /// followed the event crossing the cap closed the connection instead, and
    /// `hydra events` then stopped: seen once as a hang under ThreadSanitizer).
    @Test func eventsLargerThanTheCapReachAReaderAndDropAStalledOne() throws {
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "maxOutboundBytes": 65536}"#)
        defer { server.terminate() }
        let reader = try server.client()
        _ = try reader.call("events.subscribe", ["events": ["job.succeeded"]])
        // Two subscriptions: the second copy of the event that backed it up closed it without the notice.
        let stalled = try server.client()
        _ = try stalled.call("events.subscribe", ["events": ["job.succeeded"]])
        _ = try stalled.call("events.subscribe", ["events": ["job.succeeded"]])
        let client = try server.client()
        let big = String(repeating: "z", count: 150_000)
        var ids: [JSONValue] = []
        var received = 0
        // One at a time, each read before the next: the reader keeps up.
        for _ in 0..<40 {
            let id = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .string(big)]])["jobId"]!
            ids.append(id)
            let note = try #require(try reader.nextNotification(timeout: .seconds(10)), "the reader got nothing")
            #expect(note["method"] == "hydra.event" && note["params"]?["jobId"] == id, "\(note["method"] ?? .null)")
            if note["method"] == "hydra.event" { received += 1 }
        }
        #expect(received == 40)
        // The stalled one: dropped with the notice, its connection still answering.
        var dropped = false
        while let note = try stalled.nextNotification(timeout: .seconds(2)) {
            if note["method"] == "hydra.dropped" { dropped = true; break }
        }
        #expect(dropped)
        #expect(try stalled.call("hydra.ping")["version"] != nil)
        #expect(try reader.call("hydra.stats")["subscriptions"] == 1)
    }

    @Test func tenThousandJobsSurviveKill9MidRun() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        var acknowledged: [JSONValue] = []
        for batch in 0..<20 {
            let calls: [(method: String, params: JSONValue)] = (0..<500).map { i in
                ("job.submit", ["job": ["type": "local", "name": "delay", "input": ["ms": .int((batch * 500 + i) % 200)]]])
            }
            for reply in try client.callBatch(calls, timeout: .seconds(30)) {
                acknowledged.append(try reply.get()["jobId"]!)
            }
        }
        #expect(acknowledged.count == 10_000)
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        // Every acknowledged job is known after the restart, and all of them finish.
        let deadline = ContinuousClock.now + .seconds(60)
        var unfinished = -1
        while ContinuousClock.now < deadline {
            let queued = try client.call("job.list", ["state": "queued", "limit": 10_000])["jobs"]?.arrayValue?.count ?? 0
            let running = try client.call("job.list", ["state": "running", "limit": 10_000])["jobs"]?.arrayValue?.count ?? 0
            unfinished = queued + running
            if unfinished == 0 { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        #expect(unfinished == 0)
        var succeeded = 0
        var after: JSONValue = .null
        repeat {
            let page = try client.call("job.list", ["state": "succeeded", "limit": 5000, "after": after])
            succeeded += page["jobs"]?.arrayValue?.count ?? 0
            after = page["next"] ?? .null
        } while after != .null
        #expect(succeeded == 10_000)
        for id in acknowledged.prefix(20) + acknowledged.suffix(20) {
            #expect(try client.call("job.status", ["jobId": id])["state"] == "succeeded")
        }
    }

    @Test func apiResponsesAreCachedAndInvalidated() throws {
        let server = try ServerProcess(config: #""apis": {"counted": {"server": "testsvr", "endpoint": "/hits/:k", "cacheTTL": 60}, "writer": {"server": "testsvr", "endpoint": "/echo", "method": "POST", "invalidates": ["counted"]}}"#)
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["cache.updated", "cache.removed"]])
        let key = "c-\(UUID().uuidString.prefix(8))"
        func run(_ job: JSONValue) throws -> JSONValue {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            return try client.call("job.result", ["jobId": id, "waitMs": 5000])
        }
        let counted: JSONValue = ["type": "remote", "api": "counted", "pathVars": ["k": .string(key)]]
        let first = try run(counted)
        #expect(first["result"]?["fromCache"] == false)
        #expect(first["result"]?["body"] == ["hits": 1])
        let second = try run(counted)
        #expect(second["result"]?["fromCache"] == true)
        #expect(second["result"]?["body"] == ["hits": 1])
        // A job may bypass the cache (and then does not touch it).
        let bypass = try run(["type": "remote", "api": "counted", "pathVars": ["k": .string(key)], "cache": ["mode": "bypass"]])
        #expect(bypass["result"]?["body"] == ["hits": 2])
        // Another caller's credentials: a response of its own, never the first one's.
        var withToken = counted
        if case .object(var o) = withToken { o["headers"] = ["Authorization": "Bearer other"]; withToken = .object(o) }
        #expect(try run(withToken)["result"]?["body"] == ["hits": 3])
        #expect(try run(withToken)["result"]?["fromCache"] == true)
        // cache.remove by api empties it: the next call goes to the server.
        #expect(try client.call("cache.remove", ["api": "counted"])["removed"] == 2)
        #expect(try run(counted)["result"]?["body"] == ["hits": 4])
        #expect(try run(counted)["result"]?["fromCache"] == true)
        #expect(try run(withToken)["result"]?["body"] == ["hits": 5])
        // cache.remove by url takes the variants for every caller.
        #expect(try client.call("cache.remove", ["url": .string("\(TestServer.base)/hits/\(key)")])["removed"] == 2)
        #expect(try run(counted)["result"]?["body"] == ["hits": 6])
        // An api listed in another's `invalidates` loses its cache when that one
        // succeeds, before the job is reported: the next step already misses.
        // (On an idle machine the store commits before the next step reads even
        // without that wait; under load it did not have to.)
        let graph = try run(["type": "serial", "steps": [["type": "remote", "api": "writer", "body": ["x": 1]], counted]])
        #expect(graph["result"]?["results"]?[1]?["body"] == ["hits": 7])
        #expect(graph["result"]?["results"]?[1]?["fromCache"] == false)
        // Mode only: a miss fails without the network.
        _ = try client.call("cache.remove", [:])
        let only = try run(["type": "remote", "api": "counted", "pathVars": ["k": .string(key)], "cache": ["mode": "only"]])
        #expect(only["state"] == "failed")
        let stats = try client.call("hydra.stats")
        #expect(stats["cache"]?["hits"] == 3)
        // Stored and removed responses are named by the same key; the other
        // caller's has a digest of its credentials (never the token itself).
        var events: [String] = []
        while let note = try watcher.nextNotification(timeout: .milliseconds(300)), let params = note["params"] {
            events.append("\(params["event"]?.stringValue ?? "?") \(params["key"]?.stringValue ?? "?")")
        }
        #expect(!events.contains { $0.contains("other") })
        let cached = "GET \(TestServer.base)/hits/\(key)"
        let variant = String(try #require(events.first { $0.hasPrefix("cache.updated \(cached) auth=") }).dropFirst("cache.updated ".count))
        // The digest is keyed by a secret of the store: not a plain SHA-256 of
        // the credentials, which anyone seeing the key could test guesses against.
        let plain = String(ResourceKey.sha256(Array("authorization:Bearer other\n".utf8)).prefix(24))
        #expect(!variant.hasSuffix(plain) && variant.count == cached.count + " auth=".count + 24, "\(variant)")
        let (u, r) = ("cache.updated", "cache.removed")
        let expected = [(u, cached), (u, variant), (r, cached), (r, variant), (u, cached), (u, variant), (r, cached),
                        (r, variant), (u, cached), (r, cached), (u, cached), (r, cached)].map { "\($0.0) \($0.1)" }
        #expect(events.sorted() == expected.sorted())
        #expect(events.count == expected.count)
    }

    @Test func hostileMessagesNeverTakeTheServerDown() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let raw = try server.raw()
        // A graph nested as deep as the JSON limit allows, then deeper.
        for depth in [250, 300] {
            var spec = #"{"type":"local","name":"echo","input":1}"#
            for _ in 0..<depth { spec = #"{"type":"serial","steps":["# + spec + "]}" }
            let reply = try rawCall(raw, #"{"jsonrpc":"2.0","id":1,"method":"job.submit","params":{"job":"# + spec + "}}")
            #expect(reply["result"]?["jobId"] != nil || reply["error"]?["code"] == -32700, "\(reply)")
            if let id = reply["result"]?["jobId"] {
                let client = try server.client()
                #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded")
            }
        }
        #expect(try rawCall(raw, String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000))["error"]?["code"] == -32700)
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":2,"method":"job.status","params":{"jobId":""# + String(repeating: "x", count: 100_000) + "\"}}")["error"]?["code"] == -32002)
        let badCursor = try rawCall(raw, #"{"jsonrpc":"2.0","id":3,"method":"job.list","params":{"after":"zz|x"}}"#)["error"]
        #expect(badCursor?["data"]?["field"] == "after" && badCursor?["data"]?["reason"]?.stringValue?.hasPrefix("after") == false,
                "\(String(describing: badCursor))")
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":4,"method":"events.subscribe","params":{"fromSeq":-1}}"#)["error"]?["code"] == -32602)
        // An unknown event name is named by its place in the list, as a wrong type is.
        let unknownEvent = try rawCall(raw, #"{"jsonrpc":"2.0","id":7,"method":"events.subscribe","params":{"events":["job.queued","nothing.x"]}}"#)["error"]
        #expect(unknownEvent?["code"] == -32602 && unknownEvent?["data"]?["field"] == "events[1]", "\(String(describing: unknownEvent))")
        #expect(unknownEvent?["message"]?.stringValue?.contains("unknown event \"nothing.x\"") == true, "\(String(describing: unknownEvent))")
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":5,"method":"hydra.ping","params":"x"}"#)["error"]?["code"] == -32600)
        #expect(try rawCall(raw, "\u{FF}\u{FE}garbage")["error"]?["code"] == -32700)
        #expect(try rawCall(raw, #"{"jsonrpc":"2.0","id":6,"method":"hydra.ping"}"#)["result"]?["version"] != nil)
    }

    @Test func cliClientCommands() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let connect = ["--connect", server.address.description]
        let cli = RunCommandTests()
        let ping = try cli.hydra(["ping"] + connect)
        #expect(ping.status == 0)
        #expect(try JSONParser.parse(ping.out.trimmingCharacters(in: .whitespacesAndNewlines))["version"] != nil)
        let stats = try cli.hydra(["stats"] + connect)
        #expect(stats.status == 0)
        #expect(try JSONParser.parse(stats.out.trimmingCharacters(in: .whitespacesAndNewlines))["jobs"] != nil, "\(stats.out)")

        // --follow off a terminal: NDJSON events, then the result last; exit 0.
        let follow = try cli.hydra(["submit", "-", "--follow"] + connect,
                                   stdin: #"{"type":"serial","steps":[{"type":"local","name":"echo","input":1},{"type":"local","name":"echo","input":2}]}"#)
        #expect(follow.status == 0, "\(follow.err)")
        let lines = follow.out.split(separator: "\n").map(String.init)
        let last = try JSONParser.parse(try #require(lines.last))
        #expect(last["state"] == "succeeded")
        #expect(last["result"]?["results"] == [1, 2])
        let events = try lines.dropLast().map { try JSONParser.parse($0) }
        #expect(events.first?["event"] == "job.queued")
        #expect(events.contains { $0["event"] == "group.done" })
        let jobId = try #require(last["jobId"]?.stringValue)

        #expect(try cli.hydra(["status", jobId] + connect).out.contains("\"succeeded\""))
        #expect(try cli.hydra(["result", jobId] + connect).status == 0)
        #expect(try cli.hydra(["jobs", "--state", "succeeded"] + connect).out.contains(jobId))
        #expect(try cli.hydra(["workers"] + connect).out.contains("\"local\""))
        #expect(try cli.hydra(["shared", "set", "k", "[1,2]"] + connect).status == 0)
        #expect(try cli.hydra(["shared", "get", "k"] + connect).out == "[1,2]\n")

        // A failing job exits 1; an invalid one exits 2 naming the field; a bad address 2; no server 1.
        let failed = try cli.hydra(["submit", "-", "--follow"] + connect, stdin: #"{"type":"local","name":"fail","input":{"message":"no"}}"#)
        #expect(failed.status == 1)
        let invalid = try cli.hydra(["submit", "-"] + connect, stdin: #"{"type":"remote","url":3}"#)
        #expect(invalid.status == 2)
        #expect(invalid.err.contains("job.url: expected string"))
        // An unknown worker is a refused call (not found), not invalid input: exit 1, as for a named job.
        let noWorker = try cli.hydra(["submit", "-"] + connect, stdin: #"{"type":"local","name":"echo","worker":"nope"}"#)
        #expect(noWorker.status == 1)
        #expect(noWorker.err.contains("job.worker: unknown worker 'nope' (-32002)"), "\(noWorker.err)")
        #expect(try cli.hydra(["submit", "-"] + connect, stdin: #"{"type":"job","name":"no-such-job"}"#).status == 1)
        #expect(try cli.hydra(["ping", "--connect", "nowhere"]).status == 2)
        #expect(try cli.hydra(["ping", "--connect", "127.0.0.1:\(TestServer.closedPort)"]).status == 1)
        // A host name is looked up; one that does not resolve is invalid input (exit 2), named.
        if case .tcp(_, let port) = server.address {
            #expect(try cli.hydra(["ping", "--connect", "LOCALHOST:\(port)"]).status == 0)
        }
        let unknown = try cli.hydra(["ping", "--connect", "no-such-host.invalid:7400"])
        #expect(unknown.status == 2 && unknown.err.contains("cannot resolve the host \"no-such-host.invalid\""), "\(unknown.err)")
        #expect(try cli.hydra(["status", "nope"] + connect).status == 1)
    }
}

/// Polls `condition` every 10 ms (blocking the thread) until it holds or `timeout` passes.
func waitUntilBlocking(timeout: Duration, _ condition: () -> Bool) throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return }
        Thread.sleep(forTimeInterval: 0.01)
    }
}
