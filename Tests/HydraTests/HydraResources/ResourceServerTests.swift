import Crypto
import Foundation
import HydraCore
import HydraRPC
import Testing

/// The `resource.*` methods, events and counters (resources.md §2–3) on the
/// real server binary, its index in the SQLite state store.
@Suite(.ownThreads) struct ResourceServerTests {
    /// The error a call answers with, nil when it succeeds.
    func failure(_ client: RPCClient, _ method: String, _ params: JSONValue) -> RPCClientError? {
        do {
            _ = try client.call(method, params)
            return nil
        } catch {
            return error
        }
    }

    func code(_ client: RPCClient, _ method: String, _ params: JSONValue) -> Int? { failure(client, method, params)?.code }

    @Test func everyMethodAndEvent() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["resource.stored", "resource.removed"]])
        let n = "s" + UUID().uuidString.prefix(8).lowercased()
        let urlA = TestServer.url("/resource/\(n)a")
        let urlB = TestServer.url("/resource/\(n)b?size=100")
        var keys: [String] = []
        for url in [urlA, urlB] {
            let id = try client.call("job.submit", ["job": ["type": "resource", "url": .string(url)]])["jobId"]!
            let result = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
            #expect(result["result"]?["source"] == "network", "\(result)")
            keys.append(try #require(result["result"]?["key"]?.stringValue))
        }
        // A memory hit, counted by hydra.stats and resource.stats.
        let hit = try client.call("job.result", ["jobId": client.call("job.submit", ["job": ["type": "resource", "url": .string(urlA), "as": "text"]])["jobId"]!, "waitMs": 10_000])
        #expect(hit["result"]?["source"] == "memory" && hit["result"]?["content"] == .string("resource \(n)a v1"))
        #expect(try client.call("hydra.stats")["resources"]?["hits"]?["memory"] == 1)

        let stat = try client.call("resource.stat", ["url": .string(urlA)])
        #expect(stat["key"] == .string(keys[0]) && stat["bytes"] == .int("resource \(n)a v1".utf8.count))
        #expect(stat["path"] == .string("resources/\(keys[0].prefix(2))/\(keys[0]).bin"))
        #expect(try client.call("resource.stat", ["key": .string(keys[1])])["url"] == .string(urlB))
        #expect(code(client, "resource.stat", ["url": .string(TestServer.url("/resource/never"))]) == -32002)
        // Named by the param that was given (it said `key` for a url).
        #expect(failure(client, "resource.stat", ["url": .string(TestServer.url("/resource/never"))])?.message == "url: not in repository")
        #expect(failure(client, "resource.read", ["url": .string(TestServer.url("/resource/never"))])?.message == "url: not in repository")
        #expect(code(client, "resource.stat", [:]) == -32602)
        // A key is 64 hex digits, in either case. What cannot be one names no copy: stat
        // and read answer -32002 as for any missing copy (resources.md §2), saying what a
        // key looks like; a removal refuses it (a typo, not "nothing removed").
        #expect(try client.call("resource.stat", ["key": .string(keys[1].uppercased())])["key"] == .string(keys[1]))
        for bad: JSONValue in [.string(String(repeating: "z", count: 64)), "../../hydra", "nonexistent", .string(String(keys[1].prefix(10)))] {
            #expect(code(client, "resource.stat", ["key": bad]) == -32002, "\(bad)")
            #expect(code(client, "resource.read", ["key": bad]) == -32002, "\(bad)")
            #expect(code(client, "resource.remove", ["key": bad]) == -32602, "\(bad)")
        }
        #expect(failure(client, "resource.stat", ["key": "nonexistent"])?.message.contains("64 hex digits") == true)
        #expect(code(client, "resource.stat", ["url": .string(urlA), "key": .string(keys[1])]) == -32602)

        let read = try client.call("resource.read", ["url": .string(urlA), "as": "text", "offset": 9, "length": 4])
        #expect(read["content"] == .string(String("resource \(n)a v1".dropFirst(9).prefix(4))) && read["eof"] == false)
        let whole = try client.call("resource.read", ["key": .string(keys[0])])
        #expect(whole["content"] == .string(Data("resource \(n)a v1".utf8).base64EncodedString()) && whole["eof"] == true)
        #expect(code(client, "resource.read", ["url": .string(urlA), "as": "pdf"]) == -32602)

        let listed = try client.call("resource.list", ["prefix": .string(TestServer.url("/resource/\(n)"))])
        #expect(listed["resources"]?.arrayValue?.compactMap { $0["key"]?.stringValue } == [keys[1], keys[0]])
        // Each item is the stat object (resources.md: `[stat...]`), `source` included.
        #expect(listed["resources"]?.arrayValue?.last == stat)
        let page = try client.call("resource.list", ["prefix": .string(TestServer.url("/resource/\(n)")), "limit": 1])
        #expect(page["resources"]?.arrayValue?.count == 1 && page["next"] == .string(keys[1]))
        #expect(code(client, "resource.list", ["after": "garbage"]) == -32602)
        // A limit past a page's 1,000 is a full page, not an error.
        #expect(try client.call("resource.list", ["prefix": .string(TestServer.url("/resource/\(n)")), "limit": 5000])["resources"]?.arrayValue?.count == 2)
        #expect(code(client, "resource.list", ["limit": 0]) == -32602)

        let stats = try client.call("resource.stats")
        #expect(stats["count"] == 2 && stats["hits"]?["memory"] == 1 && stats["misses"] == 2)
        #expect(stats["bytes"]?.intValue == "resource \(n)a v1".utf8.count + 100)

        let removed = try client.call("resource.remove", ["url": .string(urlA)])
        #expect(removed["removed"] == 1)
        #expect(code(client, "resource.stat", ["key": .string(keys[0])]) == -32002)
        // A page's `next` whose copy is gone: an error, not an empty page read as the end.
        #expect(code(client, "resource.list", ["after": .string(keys[0])]) == -32602)
        #expect(!FileManager.default.fileExists(atPath: server.stateDirectory + "/resources/\(keys[0].prefix(2))/\(keys[0]).bin"))
        // Removed from the memory tier too: `only` finds nothing.
        let only = try client.call("job.result", ["jobId": client.call("job.submit", ["job": ["type": "resource", "url": .string(urlA), "mode": "only"]])["jobId"]!, "waitMs": 10_000])
        #expect(only["error"]?["message"] == "not in repository")
        #expect(code(client, "resource.remove", [:]) == -32602)

        let purged = try client.call("resource.purge", ["maxBytes": 0])
        #expect(purged["removed"] == 1 && purged["bytes"] == 100)
        #expect(try client.call("resource.stats")["count"] == 0)

        // By key and by URL prefix (resources.md §2), with the bytes they freed.
        for url in [urlA, urlB] {
            let id = try client.call("job.submit", ["job": ["type": "resource", "url": .string(url)]])["jobId"]!
            #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["result"]?["source"] == "network")
        }
        let byKey = try client.call("resource.remove", ["key": .string(keys[0])])
        #expect(byKey["removed"] == 1 && byKey["bytes"]?.intValue == "resource \(n)a v1".utf8.count, "\(byKey)")
        #expect(try client.call("resource.remove", ["prefix": "http://nowhere.invalid/"])["removed"] == 0)
        let byPrefix = try client.call("resource.remove", ["prefix": .string(TestServer.url("/resource/\(n)"))])
        #expect(byPrefix["removed"] == 1 && byPrefix["bytes"] == 100, "\(byPrefix)")
        #expect(try client.call("resource.stats")["count"] == 0)

        var seen: [String] = []
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) {
            guard let event = note["params"], let name = event["event"]?.stringValue else { continue }
            seen.append(name + " " + (event["reason"]?.stringValue ?? event["source"]?.stringValue ?? ""))
        }
        #expect(seen == ["resource.stored network", "resource.stored network", "resource.removed remove", "resource.removed purge",
                         "resource.stored network", "resource.stored network", "resource.removed remove", "resource.removed remove"])
    }

    /// A counter of the test server, read through the server under test.
    func counter(_ client: RPCClient, _ key: String) throws -> Int {
        let id = try client.call("job.submit", ["job": ["type": "remote", "url": .string(TestServer.url("/count/" + key))]])["jobId"]!
        return try client.call("job.result", ["jobId": id, "waitMs": 10_000])["result"]?["body"]?["count"]?.intValue ?? -1
    }

    /// Runs a resource job with `extra` members and returns its result object (or its error).
    func resourceJob(_ client: RPCClient, _ url: String, _ extra: [String: JSONValue] = [:]) throws -> JSONValue {
        var job: JSONValue = ["type": "resource", "url": .string(url)]
        if case .object(var members) = job {
            for (name, value) in extra { members[name] = value }
            job = .object(members)
        }
        let id = try client.call("job.submit", ["job": job])["jobId"]!
        let done = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        return done["result"] ?? done["error"] ?? .null
    }

    /// The `resource.*` events `watcher` receives within `seconds`, until `count` came.
    func resourceEvents(_ watcher: RPCClient, count: Int, seconds: Double = 5) throws -> [JSONValue] {
        var events: [JSONValue] = []
        let deadline = Date().addingTimeInterval(seconds)
        while events.count < count, Date() < deadline {
            guard let note = try watcher.nextNotification(timeout: .milliseconds(200)), let event = note["params"],
                  event["event"]?.stringValue?.hasPrefix("resource.") == true else { continue }
            events.append(event)
        }
        return events
    }

    /// resources.md §2 `resource.purge {olderThanSec}` over the wire: the
    /// copies unused for that long go (their entries, files and a
    /// `resource.removed` with reason `purge` each), the others stay, among
    /// them one stored as long ago but used since (README: `olderThanSec`
    /// counts from `lastUsedAt`). Would catch `olderThanSec` ignored, or
    /// counted from `storedAt`.
    @Test func purgeOlderThanRemovesOnlyCopiesUnusedThatLong() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["resource.removed"]])
        let n = "p" + UUID().uuidString.prefix(8).lowercased()
        func url(_ name: String) -> String { TestServer.url("/resource/\(n)\(name)?size=100") }
        var keys: [String: String] = [:]
        for name in ["o1", "o2", "used"] {
            keys[name] = try #require(try resourceJob(client, url(name))["key"]?.stringValue)
        }
        Thread.sleep(forTimeInterval: 3.3)  // wide margins: a sanitized run is slow
        #expect(try resourceJob(client, url("used"))["source"] == "memory")
        keys["new"] = try #require(try resourceJob(client, url("new"))["key"]?.stringValue)

        let purged = try client.call("resource.purge", ["olderThanSec": 3])
        #expect(purged == ["removed": 2, "bytes": 200], "\(purged)")
        for name in ["o1", "o2"] {
            let key = keys[name]!
            #expect(code(client, "resource.stat", ["key": .string(key)]) == -32002, "\(name)")
            #expect(!FileManager.default.fileExists(atPath: server.stateDirectory + "/resources/\(key.prefix(2))/\(key).bin"))
        }
        for name in ["used", "new"] {
            #expect(try client.call("resource.stat", ["key": .string(keys[name]!)])["url"] == .string(url(name)), "\(name)")
        }
        let removed = try resourceEvents(watcher, count: 2)
        #expect(Set(removed.compactMap { $0["key"]?.stringValue }) == [keys["o1"]!, keys["o2"]!], "\(removed)")
        #expect(removed.allSatisfy { $0["reason"] == "purge" }, "\(removed)")
        // Nothing else has gone unused for 3 s.
        #expect(try client.call("resource.purge", ["olderThanSec": 3]) == ["removed": 0, "bytes": 0])
    }

    /// resources.md §1: "304 keeps the bytes and renews storedAt": after a
    /// revalidation `resource.stat` shows a later `storedAt` and the same
    /// copy, and the body crossed the wire once. Would catch a 304 that leaves
    /// `storedAt` as it was (a stale copy would then be revalidated at every use).
    @Test func a304RenewsStoredAtInResourceStat() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let client = try server.client()
        let n = "t" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=500")
        #expect(try resourceJob(client, url)["source"] == "network")
        let before = try client.call("resource.stat", ["url": .string(url)])
        Thread.sleep(forTimeInterval: 0.05)
        #expect(try resourceJob(client, url, ["mode": "refresh"])["source"] == "revalidated")
        let after = try client.call("resource.stat", ["url": .string(url)])
        let (was, now) = (try #require(wireTime(before["storedAt"])), try #require(wireTime(after["storedAt"])))
        #expect(now > was, "storedAt \(String(describing: before["storedAt"])) then \(String(describing: after["storedAt"]))")
        for field in ["key", "bytes", "sha256", "etag", "path"] {
            #expect(after[field] == before[field] && after[field] != nil, "\(field)")
        }
        #expect(try counter(client, "res304-\(n)") == 1)
        #expect(try counter(client, "resbytes-\(n)") == 500)
    }

    /// resources.md §3 over `events.subscribe`, field by field:
    /// `resource.stored` (`key`, `url`, `bytes`, `source`) for a copy from
    /// the network and for one a 304 renewed, and `resource.removed` with
    /// reason `corrupt` (`key`, `url`) when a job finds a byte of the file
    /// changed on disk (memory tier off), before the copy is fetched again.
    /// Would catch a field missing or carrying another value, and a corrupt
    /// copy dropped without its event or under another reason.
    /// `hydra run` in the folder of a running server (both on `var` by default):
    /// its engine, whose index is in memory, cleared every copy it did not know
    /// from the repository at startup, the server's included. It clears only
    /// in a folder whose lock it takes; the server's copies stay.
    @Test func hydraRunInAServedFolderLeavesTheServersCopiesAlone() throws {
        let server = try ServerProcess(config: #""resources": {"memoryBytes": 0}"#)
        defer { _ = server.terminate() }
        let client = try server.client()
        let n = "w" + UUID().uuidString.prefix(8).lowercased()
        let first = try resourceJob(client, TestServer.url("/resource/\(n)?size=300"))
        let path = server.stateDirectory + "/" + (try #require(first["path"]?.stringValue))
        #expect(FileManager.default.fileExists(atPath: path))
        let run = try RunCommandTests().hydra(["run", "-", "--state", server.stateDirectory],
                                              stdin: #"{"type":"local","name":"echo","input":1}"#)
        #expect(run.status == 0, "\(run.err)")
        #expect(FileManager.default.fileExists(atPath: path), "hydra run removed the server's copy")
        let again = try resourceJob(client, TestServer.url("/resource/\(n)?size=300"))
        #expect(again["source"] == "disk", "\(again)")
        // In a folder of its own it does clear what an earlier run left (its index starts empty).
        let own = NSTemporaryDirectory() + "hydra-run-state-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: own) }
        let fetched = try RunCommandTests().hydra(["run", "-", "--state", own],
                                                  stdin: #"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)?size=300"))"}"#)
        let left = own + "/" + (try #require(JSONParser.parse(fetched.out.split(separator: "\n").last.map(String.init) ?? "")["result"]?["path"]?.stringValue, "\(fetched)"))
        #expect(FileManager.default.fileExists(atPath: left))
        #expect(try RunCommandTests().hydra(["run", "-", "--state", own], stdin: #"{"type":"local","name":"echo","input":1}"#).status == 0)
        #expect(!FileManager.default.fileExists(atPath: left))
    }

    @Test func storedAndCorruptRemovedEventsCarryTheirFields() throws {
        let server = try ServerProcess(config: #""resources": {"memoryBytes": 0}"#)
        defer { _ = server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["resource.stored", "resource.removed"]])
        let n = "v" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=300")
        let content = "resource \(n) v1" + String(repeating: ".", count: 300 - "resource \(n) v1".utf8.count)
        let digest = ResourceKeyDigest.sha256(Array(content.utf8))
        let first = try resourceJob(client, url)
        let key = try #require(first["key"]?.stringValue, "\(first)")
        func fields(_ event: JSONValue?, _ names: [String]) -> [String: JSONValue] {
            Dictionary(uniqueKeysWithValues: names.map { ($0, event?[$0] ?? .null) })
        }
        let stored = try resourceEvents(watcher, count: 1)
        #expect(stored.first?["event"] == "resource.stored")
        #expect(fields(stored.first, ["key", "url", "bytes", "source"])
                == ["key": .string(key), "url": .string(url), "bytes": 300, "source": "network"], "\(stored)")

        // A flipped byte on disk: the next job drops the copy (corrupt) and fetches it again.
        let path = server.stateDirectory + "/" + (try #require(first["path"]?.stringValue))
        var bytes = try #require(FileManager.default.contents(atPath: path))
        bytes[bytes.count / 2] ^= 1
        try bytes.write(to: URL(fileURLWithPath: path))
        let again = try resourceJob(client, url, ["sha256": .string(digest), "as": "text"])
        #expect(again["source"] == "network" && again["content"] == .string(content), "\(again)")
        let events = try resourceEvents(watcher, count: 2)
        let removed = events.first { $0["event"] == "resource.removed" }
        #expect(fields(removed, ["key", "url", "reason"]) == ["key": .string(key), "url": .string(url), "reason": "corrupt"], "\(events)")
        let restored = events.first { $0["event"] == "resource.stored" }
        #expect(fields(restored, ["key", "url", "bytes", "source"])
                == ["key": .string(key), "url": .string(url), "bytes": 300, "source": "network"], "\(events)")
        #expect(try counter(client, "res-\(n)") == 2)

        // A 304 renews the copy: announced with source revalidated.
        #expect(try resourceJob(client, url, ["mode": "refresh"])["source"] == "revalidated")
        let renewed = try resourceEvents(watcher, count: 1)
        #expect(fields(renewed.first, ["key", "url", "bytes", "source"])
                == ["key": .string(key), "url": .string(url), "bytes": 300, "source": "revalidated"], "\(renewed)")
        #expect(try resourceEvents(watcher, count: 1, seconds: 0.3).isEmpty)
    }

    @Test func badResourceJobsAreRefusedNamingTheField() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let client = try server.client()
        do {
            _ = try client.call("job.submit", ["job": ["type": "resource", "url": "http://x/y", "cipher": "aes-gcm", "as": "text"]])
            Issue.record("accepted")
        } catch {
            #expect(error.code == -32602 && error.message.hasPrefix("job.as:"), "\(error.message)")
        }
        do {
            _ = try client.call("job.submit", ["job": ["type": "resource", "url": "http://x/y", "remaker": "nope"]])
            Issue.record("accepted")
        } catch {
            #expect(error.code == -32602 && error.message.hasPrefix("job.remaker:"), "\(error.message)")
        }
    }

    @Test func theResourceCommands() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let cli = RunCommandTests()
        let connect = ["--connect", server.address.description]
        let n = "c" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)")
        let got = try cli.hydra(["resource", "get", url, "--as", "text"] + connect)
        #expect(got.status == 0 && got.out == "resource \(n) v1\n", "\(got.err)")
        let refreshed = try cli.hydra(["resource", "get", url, "--refresh"] + connect)
        #expect(refreshed.status == 0 && refreshed.out.contains(#""source":"revalidated""#), "\(refreshed.out)")
        let stat = try cli.hydra(["resource", "stat", url] + connect)
        #expect(stat.status == 0 && stat.out.contains(#""bytes":\#("resource \(n) v1".utf8.count)"#))
        let cat = try cli.hydra(["resource", "cat", url] + connect)
        #expect(cat.status == 0 && cat.out == "resource \(n) v1")
        let ls = try cli.hydra(["resource", "ls", "--prefix", url] + connect)
        #expect(ls.status == 0 && ls.out.contains(url))
        for limit in ["0", "1001"] {
            let refused = try cli.hydra(["resource", "ls", "--limit", limit] + connect)
            #expect(refused.status == 2 && refused.err.contains("--limit: expected 1 to 1000, got \(limit)"), "\(refused.err)")
        }
        let failed = try cli.hydra(["resource", "get", TestServer.url("/resource/\(n)x?status=404")] + connect)
        #expect(failed.status == 1 && failed.err.contains("HTTP 404"))
        let rm = try cli.hydra(["resource", "rm", url] + connect)
        #expect(rm.status == 0 && rm.out.contains(#""removed":1"#))
        #expect(try cli.hydra(["resource", "stat", url] + connect).status == 1)  // not found
        #expect(try cli.hydra(["resource", "rm"] + connect).status == 2)
        // Two selectors would remove what each names: a slip, refused before anything is removed.
        let both = try cli.hydra(["resource", "rm", url, "--prefix", "http://"] + connect)
        #expect(both.status == 2 && both.err.contains("not a URL and --prefix"), "\(both.err)")
        #expect(try cli.hydra(["resource", "get", url, "--as", "pdf"] + connect).status == 2)
        let purge = try cli.hydra(["resource", "purge", "--older-than", "0"] + connect)
        #expect(purge.status == 0 && purge.out.contains(#""removed":0"#))
    }

    @Test func aesGCMCopiesAreNeverStoredInClear() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "a passphrase of 16+ chars"])
        defer { _ = server.terminate() }
        let client = try server.client()
        let n = "k" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=3000")
        let clear = "resource \(n) v1"
        let id = try client.call("job.submit", ["job": ["type": "resource", "url": .string(url), "cipher": "aes-gcm"]])["jobId"]!
        let result = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        #expect(result["result"]?["source"] == "network" && result["result"]?["path"] == nil, "\(result)")
        let key = try #require(result["result"]?["key"]?.stringValue)
        // Readable with resource.read, and by a job from disk after the memory tier forgot it.
        let read = try client.call("resource.read", ["key": .string(key), "as": "text", "length": 40])
        #expect(read["content"]?.stringValue?.hasPrefix(clear) == true && read["bytes"] == 3000)
        _ = try client.call("hydra.stats")
        // No byte in clear: not in the repository, the database or its WAL.
        let file = try #require(FileManager.default.contents(atPath: server.stateDirectory + "/resources/\(key.prefix(2))/\(key).bin"))
        #expect(file.count > 3000 && file.range(of: Data(clear.utf8)) == nil && file.range(of: Data(String(repeating: ".", count: 64).utf8)) == nil)
        for name in ["hydra.db", "hydra.db-wal"] {
            if let bytes = FileManager.default.contents(atPath: server.stateDirectory + "/" + name) {
                #expect(bytes.range(of: Data(clear.utf8)) == nil, "\(name)")
            }
        }
        // Another aes-gcm job checks its sha256 of the clear content against the kept copy.
        let digest = ResourceKeyDigest.sha256(Array(clear.utf8) + Array(repeating: UInt8(ascii: "."), count: 3000 - clear.utf8.count))
        let checked = try client.call("job.result", ["jobId": client.call("job.submit", ["job": ["type": "resource", "url": .string(url), "cipher": "aes-gcm", "sha256": .string(digest)]])["jobId"]!, "waitMs": 10_000])
        #expect(checked["result"]?["source"] == "memory", "\(checked)")
        // A job without a cipher is never served the sealed copy (its content would land in
        // the result in clear), nor does it replace it with a clear one: it fails naming cipher.
        let plain = try client.call("job.result", ["jobId": client.call("job.submit", ["job": ["type": "resource", "url": .string(url), "as": "text"]])["jobId"]!, "waitMs": 10_000])
        #expect(plain["state"] == "failed" && plain["error"]?["message"]?.stringValue?.hasPrefix("cipher:") == true, "\(plain)")
        #expect(try client.call("resource.stat", ["key": .string(key)])["path"] == nil, "still sealed")
    }

    @Test func aesGCMWithoutTheKeyIsRefusedNamingIt() throws {
        let server = try ServerProcess()
        defer { _ = server.terminate() }
        let client = try server.client()
        do {
            _ = try client.call("job.submit", ["job": ["type": "resource", "url": "http://x/y", "cipher": "aes-gcm"]])
            Issue.record("accepted")
        } catch {
            #expect(error.code == -32602 && error.message.contains("HYDRA_SHARED_KEY"), "\(error.message)")
        }
    }

    /// An aes-gcm copy left by a run with the key, read by a run without it:
    /// `resource.read` answers -32602 naming `HYDRA_SHARED_KEY`, and the copy
    /// stays (it is not corrupt); with the key again it reads as before.
    @Test func aSealedCopyWithoutTheKeyStaysAndSaysWhy() throws {
        let state = NSTemporaryDirectory() + "hydra-ressealed-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let key = ["HYDRA_SHARED_KEY": "a passphrase of 16+ chars"]
        let url = TestServer.url("/resource/s\(UUID().uuidString.prefix(8).lowercased())")
        var server = try ServerProcess(state: state, environment: key)
        var client = try server.client()
        let id = try client.call("job.submit", ["job": ["type": "resource", "url": .string(url), "cipher": "aes-gcm"]])["jobId"]!
        let copy = try #require(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["result"]?["key"])
        _ = server.terminate()

        server = try ServerProcess(state: state)
        client = try server.client()
        do {
            _ = try client.call("resource.read", ["key": copy])
            Issue.record("read without the key")
        } catch {
            #expect(error.code == -32602 && error.message.contains("HYDRA_SHARED_KEY"), "\(error.message)")
        }
        #expect(try client.call("resource.stat", ["key": copy])["source"] == "disk")
        _ = server.terminate()

        server = try ServerProcess(state: state, environment: key)
        defer { _ = server.terminate() }
        client = try server.client()
        #expect(try client.call("resource.read", ["key": copy, "as": "text"])["content"]?.stringValue?.hasPrefix("resource ") == true)
    }
}

/// `kill -9` in the middle of 100 downloads (issue 13 §2).
@Suite(.ownThreads) struct ResourceCrashTests {
    @Test func killNineDuringDownloads() throws {
        let state = NSTemporaryDirectory() + "hydra-rescrash-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let n = "x" + UUID().uuidString.prefix(8).lowercased()
        var server = try ServerProcess(state: state)
        var client = try server.client()
        var ids: [JSONValue] = []
        for i in 0..<100 {
            let url = TestServer.url("/resource/\(n)\(i)?size=20000&delay=\(100 + i % 7 * 20)")
            ids.append(try client.call("job.submit", ["job": ["type": "resource", "url": .string(url)]])["jobId"]!)
        }
        // Killed once some copies are stored and others are in flight.
        try waitUntilBlocking(timeout: .seconds(10)) {
            ((try? client.call("resource.stats"))?["count"]?.intValue ?? 0) >= 5
        }
        server.kill9()

        server = try ServerProcess(state: state)
        defer { _ = server.terminate() }
        client = try server.client()
        for id in ids {
            let result = try client.call("job.result", ["jobId": id, "waitMs": 20_000], timeout: .seconds(30))
            #expect(result["state"] == "succeeded", "\(result)")
        }
        // No partial file anywhere, and the index and the files agree.
        let all = FileManager.default.enumerator(atPath: state + "/resources")?.allObjects as? [String] ?? []
        #expect(!all.contains { $0.contains(".hydra-download-") })
        let files = Set(all.filter { $0.hasSuffix(".bin") }.map { String($0.split(separator: "/").last!.dropLast(4)) })
        let listed = try client.call("resource.list", ["limit": 1000])["resources"]?.arrayValue ?? []
        #expect(files.count == 100 && Set(listed.compactMap { $0["key"]?.stringValue }) == files)
        for key in files {
            let data = try #require(FileManager.default.contents(atPath: state + "/resources/\(key.prefix(2))/\(key).bin"))
            #expect(data.count == 20000)
        }
    }
}

/// SHA-256 hex, for expected digests in tests.
enum ResourceKeyDigest {
    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }
}
