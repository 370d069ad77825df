import Foundation
import HydraRPC
import OrderedCollections
import Testing

@testable import Hydra

/// Statements of protocol.md and config.md that other tests only touched,
/// checked as written against the real server over real sockets: listing
/// order and cursor, `cache.remove {prefix}`, the message size default, the
/// flags over the file, the config choices the spec names, retention.
@Suite(.ownThreads) struct ServerContractTests {
    /// `job.list` (§5): newest first, `limit` per page, `next` until the last
    /// page, `state` as a filter.
    @Test func jobListPagesNewestFirstWithItsCursor() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        var ids: [String] = []
        for i in 0..<5 {
            let id = try #require(try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .int(i)]])["jobId"]?.stringValue)
            _ = try client.call("job.result", ["jobId": .string(id), "waitMs": 10_000])
            ids.append(id)
        }
        let failed = try #require(try client.call("job.submit", ["job": ["type": "local", "name": "fail", "input": ["message": "no"]]])["jobId"])
        _ = try client.call("job.result", ["jobId": failed, "waitMs": 10_000])

        var seen: [String] = []
        var after: JSONValue = .null
        var pages = 0
        repeat {
            var params: OrderedDictionary<String, JSONValue> = ["state": "succeeded", "limit": 2]
            if after != .null { params["after"] = after }
            let page = try client.call("job.list", .object(params))
            let jobs = try #require(page["jobs"]?.arrayValue)
            #expect(jobs.count <= 2)
            #expect(jobs.allSatisfy { $0["state"] == "succeeded" && $0["steps"] != nil && $0["createdAt"] != nil })
            seen += jobs.compactMap { $0["jobId"]?.stringValue }
            after = page["next"] ?? .null
            pages += 1
        } while after != .null && pages < 10
        #expect(seen == ids.reversed(), "\(seen)")
        #expect(pages == 3)
        let failures = try client.call("job.list", ["state": "failed"])["jobs"]?.arrayValue
        #expect(failures?.map { $0["jobId"] } == [failed])
    }

    /// `cache.remove {prefix}` (§5) removes the responses whose URL starts
    /// with it (every caller's), one `cache.removed` each, and no other.
    @Test func cacheRemoveByPrefixTakesOnlyThoseURLs() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["cache.removed"]])
        let urls = ["/items?a=1", "/items?a=2", "/echo/kept"].map { TestServer.url($0) }
        for url in urls {
            let job = try client.call("job.submit", ["job": ["type": "remote", "url": .string(url), "cache": ["mode": "use", "ttlSec": 600]]])
            #expect(try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 10_000])["state"] == "succeeded")
        }
        let removed = try client.call("cache.remove", ["prefix": .string(TestServer.url("/items"))])
        #expect(removed["removed"] == 2)
        var keys: Set<String> = []
        while keys.count < 2, let note = try watcher.nextNotification(timeout: .seconds(5)) {
            if let key = note["params"]?["key"]?.stringValue { keys.insert(key) }
        }
        #expect(keys == Set(urls.prefix(2).map { "GET " + $0 }), "\(keys)")
        #expect(try client.call("cache.remove", ["prefix": .string(TestServer.url("/items"))])["removed"] == 0)
        // The other response is still there: `only` answers from it.
        let only = try client.call("job.submit", ["job": ["type": "remote", "url": .string(urls[2]), "cache": ["mode": "only"]]])
        let result = try client.call("job.result", ["jobId": only["jobId"]!, "waitMs": 10_000])
        #expect(result["state"] == "succeeded" && result["result"]?["fromCache"] == true, "\(result)")
    }

    /// Extension: `events.subscribe {caughtUp: true}` sends one `hydra.caughtUp`
    /// once the subscription is live: after every replayed event, or at once
    /// after the reply; never unasked.
    @Test func caughtUpFollowsTheReplayWhenAsked() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        for input in 1...3 {
            let job = try #require(client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .int(input)]])["jobId"])
            _ = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        }
        let last = try #require(client.call("hydra.stats")["events"]?["lastSeq"]?.intValue)
        let watcher = try server.client()
        let replaying = try watcher.call("events.subscribe", ["fromSeq": 0, "caughtUp": true])
        var seqs: [Int] = []
        var caughtUp: JSONValue?
        while caughtUp == nil, let note = try watcher.nextNotification(timeout: .seconds(10)) {
            if note["method"] == "hydra.caughtUp" { caughtUp = note["params"] } else { seqs.append(note["params"]?["seq"]?.intValue ?? -1) }
        }
        #expect(seqs == Array(1...last), "\(seqs)")
        #expect(caughtUp?["subscription"] == replaying["subscription"] && caughtUp?["seq"] == .int(last), "\(String(describing: caughtUp))")

        let live = try watcher.call("events.subscribe", ["events": ["job.failed"], "caughtUp": true])
        let next = try watcher.nextNotification(timeout: .seconds(10))
        #expect(next?["method"] == "hydra.caughtUp" && next?["params"]?["subscription"] == live["subscription"], "\(String(describing: next))")

        let quiet = try server.client()
        _ = try quiet.call("events.subscribe", ["fromSeq": .int(last - 1)])
        let replayed = try quiet.nextNotification(timeout: .seconds(10))
        #expect(replayed?["params"]?["seq"] == .int(last))
        #expect(try quiet.nextNotification(timeout: .milliseconds(300)) == nil)
        do {
            _ = try quiet.call("events.subscribe", ["caughtUp": "yes"])
            Issue.record("caughtUp: \"yes\" was taken")
        } catch {
            #expect(error.code == -32602 && error.message.hasPrefix("caughtUp: "), "\(error)")
        }
    }

    /// `rpc.maxMessageBytes` defaults to 1 MiB (config.md): a line of exactly
    /// that many bytes is taken, one byte more is `-32600` and closes the connection.
    @Test func aMessageOfTheDefaultLimitIsTakenOneByteMoreIsNot() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        func line(_ bytes: Int) -> String {
            let head = #"{"jsonrpc":"2.0","id":1,"method":"job.submit","params":{"job":{"type":"local","name":"echo"},"input":""#
            let tail = #""}}"#
            return head + String(repeating: "x", count: bytes - head.utf8.count - tail.utf8.count) + tail
        }
        let fits = try server.raw()
        let taken = try rawCall(fits, line(1 << 20))
        #expect(taken["result"]?["jobId"] != nil, "\(taken)")
        let over = try server.raw()
        let refused = try rawCall(over, line((1 << 20) + 1))
        #expect(refused["error"]?["code"] == -32600 && refused["id"] == .null, "\(refused)")
        #expect(try over.readLine(timeout: .seconds(5)) == nil)  // closed
    }

    /// `--listen` and `--state` win over the file (config.md); the file's
    /// values are not used at all.
    @Test func flagsWinOverTheFile() throws {
        let unused = NSTemporaryDirectory() + "hydra-unused-\(UUID().uuidString)"
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:9"}, "state": {"path": "\#(unused)"}"#,
                                       arguments: ["--listen", "127.0.0.1:0"])
        defer { server.terminate() }
        guard case .tcp(_, let port) = server.address! else { Issue.record("not TCP"); return }
        #expect(port != 9)
        #expect(try server.client().call("hydra.ping")["version"] != nil)
        #expect(FileManager.default.fileExists(atPath: server.stateDirectory + "/hydra.db"))
        #expect(!FileManager.default.fileExists(atPath: unused))
    }

    /// Choices config.md names: `allowInsecure` (or a secret) lets the server
    /// listen beyond loopback; `HYDRA_SHARED_KEY` needs 16 characters; `state.sync`
    /// is `normal` or `full`.
    @Test func configChoicesTheSpecNames() throws {
        let open = try ServerProcess(config: #""rpc": {"listen": "0.0.0.0:0", "allowInsecure": true}"#)
        #expect(try open.client().call("hydra.ping")["version"] != nil)
        open.terminate()
        let secured = try ServerProcess(config: #""rpc": {"listen": "0.0.0.0:0"}"#, environment: ["HYDRA_RPC_SECRET": "s3cret-enough"])
        #expect(try secured.client(secret: "s3cret-enough").call("hydra.ping")["version"] != nil)
        secured.terminate()

        let state = NSTemporaryDirectory() + "hydra-contract-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let short = try RunCommandTests().hydra(["serve", "--listen", "127.0.0.1:0", "--state", state],
                                                environment: ["HYDRA_SHARED_KEY": String(repeating: "k", count: 15)])
        #expect(short.status == 2 && short.err.contains("HYDRA_SHARED_KEY") && !short.err.contains("kkkk"), "\(short.err)")
        let keyed = try ServerProcess(config: #""state": {"sync": "full"}"#,
                                      environment: ["HYDRA_SHARED_KEY": String(repeating: "k", count: 16)])
        defer { keyed.terminate() }
        let client = try keyed.client()
        #expect(try client.call("shared.set", ["key": "s", "value": "v", "cipher": "aes-gcm"])["ok"] == true)
        #expect(try client.call("shared.get", ["key": "s"])["value"] == "v")

        let bad = NSTemporaryDirectory() + "hydra-sync-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: bad) }
        try #"{"state": {"sync": "fast"}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try RunCommandTests().hydra(["serve", "--config", bad])
        #expect(refused.status == 2 && refused.err.contains("\(bad): state.sync"), "\(refused.err)")
    }

    /// `retention.hours` (§7): finished jobs and their events older than it
    /// are gone after a restart (0: at once); within it they are kept.
    @Test func retentionDropsFinishedJobsAndTheirEvents() throws {
        let first = try ServerProcess()
        let client = try first.client()
        let job = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 1]])
        _ = try client.call("job.result", ["jobId": job["jobId"]!, "waitMs": 10_000])
        #expect(first.terminate(within: .seconds(10)) == 0)

        let kept = try ServerProcess(state: first.stateDirectory)
        #expect(try kept.client().call("job.status", ["jobId": job["jobId"]!])["state"] == "succeeded")
        #expect(kept.terminate(within: .seconds(10)) == 0)

        let pruned = try ServerProcess(config: #""retention": {"hours": 0}"#, state: first.stateDirectory)
        defer { pruned.terminate() }
        let after = try pruned.client()
        // The prune runs in the background right after the start.
        try waitUntilBlocking(timeout: .seconds(10)) {
            do {
                _ = try after.call("job.status", ["jobId": job["jobId"]!])
                return false
            } catch {
                return (error as? RPCClientError)?.code == -32002
            }
        }
        // Its events went with it: a replay of them is refused as for any job the server does not have.
        let watcher = try pruned.client()
        do {
            _ = try watcher.call("events.subscribe", ["jobId": job["jobId"]!, "fromSeq": 0])
            Issue.record("a subscription to a pruned job was taken")
        } catch {
            #expect(error.code == -32002, "\(error)")
        }
        let everything = try watcher.call("events.subscribe", ["fromSeq": 0])
        #expect(everything["subscription"] != nil)
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) {
            #expect(note["params"]?["jobId"] != job["jobId"]!, "an event of a pruned job: \(note)")
        }
    }
}
