import Foundation
import Synchronization
import HydraCore
import HydraLoop
import Testing

@testable import Hydra
@testable import HydraResources
@testable import HydraStore

/// `resource` jobs (resources.md §1) against the real test server, whose
/// counters say how many requests and body bytes reached it.
@Suite(.ownThreads) final class ResourceJobTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-res-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    func engine(_ resources: String = "", index: (any ResourceIndexStore)? = nil) throws -> HydraEngine {
        let text = """
            {"servers": {"testsvr": "\(TestServer.base)"}, "defaults": {"server": "testsvr", "timeoutMs": 10000}
             \(resources.isEmpty ? "" : ", \"resources\": " + resources)}
            """
        return try HydraEngine(configuration: try Configuration(json: try JSONParser.parse(text)), stateDirectory: state,
                               resourceIndex: index)
    }

    /// A fresh name for the server's counters.
    func name() -> String { "r" + UUID().uuidString.prefix(8).lowercased() }

    func counter(_ engine: HydraEngine, _ key: String) async throws -> Int {
        let result = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/count/" + key))"}"#))
        return result.result?["body"]?["count"]?.intValue ?? -1
    }

    func resource(_ path: String, _ extra: String = "") throws -> JobSpec {
        try spec(#"{"type":"resource","url":"\#(TestServer.url(path))"\#(extra)}"#)
    }

    @Test func fetchesOnceThenServesFromMemory() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let n = name()
        let first = try await engine.run(resource("/resource/\(n)"))
        let body = "resource \(n) v1"
        #expect(first.result?["source"] == "network")
        #expect(first.result?["bytes"]?.intValue == body.utf8.count)
        #expect(first.result?["etag"]?.stringValue == "\"\(n)-1\"")
        #expect(first.result?["contentType"]?.stringValue == "text/plain; charset=utf-8")
        let key = try #require(first.result?["key"]?.stringValue)
        #expect(key.count == 64)
        let path = try #require(first.result?["path"]?.stringValue)
        #expect(path == "resources/\(key.prefix(2))/\(key).bin")
        #expect(FileManager.default.contents(atPath: state + "/" + path) == Data(body.utf8))
        // The repository holds no temporary file once the job is done.
        let folder = try FileManager.default.contentsOfDirectory(atPath: state + "/resources/" + key.prefix(2))
        #expect(folder == [key + ".bin"])

        let second = try await engine.run(resource("/resource/\(n)", #","as":"text""#))
        #expect(second.result?["source"] == "memory")
        #expect(second.result?["content"]?.stringValue == body)
        #expect(try await counter(engine, "res-\(n)") == 1)
        // Answered inside the worker's `start`: one report stands for started, skipped and succeeded,
        // and the events keep their order (protocol §6, resources.md).
        #expect(log.names(job: second.jobId) == ["job.queued@", "job.started@", "job.skipped@", "job.succeeded@"])
        #expect(log.all.contains { $0.rootJobId == second.jobId && $0.name == "job.skipped" && $0.fields["reason"] == "resource" })
        // The same file asked with the query in another order is the same resource.
        let a = try await engine.run(resource("/resource/\(n)?size=40&v=1"))
        let b = try await engine.run(resource("/resource/\(n)?v=1&size=40"))
        #expect(a.result?["key"] == b.result?["key"] && b.result?["source"] == "memory")
        #expect(engine.resources.stats.memoryHits == 2)
    }

    @Test func servesFromDiskWithTheMemoryTierOff() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let n = name()
        #expect(try await engine.run(resource("/resource/\(n)")).result?["source"] == "network")
        let again = try await engine.run(resource("/resource/\(n)", #","as":"base64""#))
        #expect(again.result?["source"] == "disk")
        #expect(again.result?["content"]?.stringValue == Data("resource \(n) v1".utf8).base64EncodedString())
        #expect(try await counter(engine, "res-\(n)") == 1)
    }

    /// resources.md §1: "A job served from memory or disk emits job.skipped
    /// with reason resource, then its final event", the disk half (the memory
    /// half is `fetchesOnceThenServesFromMemory`). Would catch a disk hit that
    /// finishes without `job.skipped`, sends it after its final event, or with
    /// another reason; and a fetch from the network that sends one.
    @Test func aDiskHitEmitsSkippedThenItsFinalEvent() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let n = name()
        let fetched = try await engine.run(resource("/resource/\(n)"))
        #expect(fetched.result?["source"] == "network")
        let hit = try await engine.run(resource("/resource/\(n)"))
        #expect(hit.result?["source"] == "disk", "\(hit.json)")
        engine.bus.waitForEmits()
        #expect(!log.names(job: fetched.jobId).contains("job.skipped@") && log.names(job: fetched.jobId).last == "job.succeeded@")
        #expect(log.names(job: hit.jobId) == ["job.queued@", "job.started@", "job.skipped@", "job.succeeded@"])
        let skipped = log.all.filter { $0.rootJobId == hit.jobId && $0.name == "job.skipped" }
        #expect(skipped.count == 1 && skipped.first?.fields["reason"] == "resource", "\(skipped)")
    }

    /// resources.md §1: without the job's `maxAgeSec`, a copy is fresh for
    /// `resources.maxAgeSec` (here 1 s): served from the repository (memory,
    /// or disk with the tier off) at once, revalidated once older than that,
    /// and fresh again after the 304. Would catch a default freshness taken
    /// from anywhere but the configuration (the built-in 86400 s: the copy
    /// would still be served after 1 s; none: the second job would go out).
    @Test(arguments: [67_108_864, 0])
    func theDefaultFreshnessIsResourcesMaxAgeSec(memoryBytes: Int) async throws {
        // 2 s: a loaded machine (ThreadSanitizer) may take a while between two jobs that must find the copy fresh.
        let engine = try engine(#"{"maxAgeSec": 2, "purgeIntervalSec": 3600, "memoryBytes": \#(memoryBytes)}"#)
        defer { engine.shutdown() }
        let tier: JSONValue = memoryBytes > 0 ? "memory" : "disk"
        let n = name()
        #expect(try await engine.run(resource("/resource/\(n)")).result?["source"] == "network")
        #expect(try await engine.run(resource("/resource/\(n)")).result?["source"] == tier)
        try await Task.sleep(for: .milliseconds(2200))
        let stale = try await engine.run(resource("/resource/\(n)", #","as":"text""#))
        #expect(stale.result?["source"] == "revalidated", "\(stale.json)")
        #expect(stale.result?["content"] == .string("resource \(n) v1"))
        #expect(try await engine.run(resource("/resource/\(n)")).result?["source"] == tier)
        #expect(try await counter(engine, "res-\(n)") == 2)
        #expect(try await counter(engine, "res304-\(n)") == 1)
    }

    @Test func revalidatesAStaleCopyWithoutTheBody() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        for (n, query) in [(name(), ""), (name(), "?etag=0")] {
            let path = "/resource/\(n)\(query)"
            #expect(try await engine.run(resource(path, #","maxAgeSec":0"#)).result?["source"] == "network")
            let stale = try await engine.run(resource(path, #","maxAgeSec":0,"as":"text""#))
            #expect(stale.result?["source"] == "revalidated")
            #expect(stale.result?["content"]?.stringValue == "resource \(n) v1")
            let refreshed = try await engine.run(resource(path, #","mode":"refresh""#))
            #expect(refreshed.result?["source"] == "revalidated")
            // Three requests, two answered 304: the body crossed the wire once.
            #expect(try await counter(engine, "res-\(n)") == 3)
            #expect(try await counter(engine, "res304-\(n)") == 2)
            #expect(try await counter(engine, "resbytes-\(n)") == "resource \(n) v1".utf8.count)
        }
        #expect(engine.resources.stats.revalidated == 4)
    }

    @Test func onlyNeverTouchesTheNetwork() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let missing = try await engine.run(resource("/resource/\(n)", #","mode":"only""#))
        #expect(missing.error?.kind == .invalid && missing.error?.message == "not in repository")
        #expect(try await counter(engine, "res-\(n)") == 0)
        _ = try await engine.run(resource("/resource/\(n)"))
        let stale = try await engine.run(resource("/resource/\(n)", #","mode":"only","maxAgeSec":0"#))
        #expect(stale.result?["source"] == "memory")
    }

    @Test func concurrentJobsOfOneKeyMakeOneTransfer() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let steps = Array(repeating: #"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)?delay=300"))","as":"text"}"#, count: 100)
        let group = try await engine.run(spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#))
        let results = try #require(group.result?["results"]?.arrayValue)
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0["content"]?.stringValue == "resource \(n) v1" })
        #expect(try await counter(engine, "res-\(n)") == 1)
        #expect(engine.resources.stats.merged == 99)
    }

    @Test func failuresNeverStoreNorReplaceACopy() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let notFound = try await engine.run(resource("/resource/\(n)?status=404"))
        #expect(notFound.error?.kind == .http && notFound.error?.status == 404)
        #expect(try await engine.run(resource("/resource/\(n)?status=404", #","mode":"only""#)).error?.message == "not in repository")
        // A good copy, then a failing refresh: the copy stays.
        let good = try await engine.run(resource("/resource/\(n)"))
        #expect(good.result?["source"] == "network")
        let digest = try #require(good.result?["sha256"]?.stringValue)
        #expect(digest == ResourceKey.sha256(Array("resource \(n) v1".utf8)))
        let wrong = String(repeating: "0", count: 64)
        let mismatch = try await engine.run(resource("/resource/\(n)?v=2", #","sha256":"\#(wrong)""#))
        #expect(mismatch.error?.kind == .invalid && mismatch.error?.message.hasPrefix("sha256:") == true)
        #expect(try await engine.run(resource("/resource/\(n)?v=2", #","mode":"only""#)).error?.message == "not in repository")
        let matching = try await engine.run(resource("/resource/\(n)", #","sha256":"\#(digest)""#))
        #expect(matching.result?["source"] == "memory")
    }

    /// Protocol §4: retries honour `Retry-After`, a resource job's as a remote
    /// job's (its transfer used to come back after its own backoff only).
    @Test(arguments: [503, 429])
    func aRetryWaitsOutTheServersRetryAfter(status: Int) async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let started = Date()
        let done = try await engine.run(resource("/flaky/\(name())/1?status=\(status)&retryAfter=1",
                                                 #","retry":{"maxAttempts":2,"backoffMs":10,"maxBackoffMs":50}"#))
        #expect(done.state == .succeeded, "\(String(describing: done.error))")
        let retrying = log.all.filter { $0.rootJobId == done.jobId && $0.name == "job.retrying" }
        #expect(retrying.count == 1 && retrying.first?.fields["delayMs"] == .int(1000), "\(retrying.map(\.fields))")
        #expect(Date().timeIntervalSince(started) >= 0.95)
    }

    /// rest.md §8: a step's `label` is echoed in its events; a resource job is routed as a remote one.
    @Test func aResourceJobsLabelIsInItsEvents() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let done = try await engine.run(resource("/resource/\(name())", #","label":"logo""#))
        #expect(done.state == .succeeded)
        let mine = log.all.filter { $0.rootJobId == done.jobId && $0.name.hasPrefix("job.") }
        #expect(mine.count >= 3 && mine.allSatisfy { $0.fields["label"] == "logo" }, "\(mine.map { ($0.name, $0.fields) })")
    }

    /// A graph that reads a manifest, then fetches the file it names with the
    /// digest it gives (protocol §4: any string of a step may be a reference,
    /// typed fields included; checked once resolved).
    @Test func typedFieldsMayComeFromEarlierSteps() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let digest = ResourceKey.sha256(Array("resource \(n) v1".utf8))
        func graph(_ sha: String) throws -> JobSpec {
            try spec(#"""
                {"type":"serial","steps":[{"type":"local","name":"echo","input":{"sha":"\#(sha)","mode":"use","age":60}},
                 {"type":"resource","url":"\#(TestServer.url("/resource/" + n))","sha256":"${prev.sha}",
                  "mode":"${prev.mode}","maxAgeSec":"${prev.age}","as":"text"}]}
                """#)
        }
        let wrong = try await engine.run(graph(String(repeating: "0", count: 64)))
        #expect(wrong.error?.kind == .invalid && wrong.error?.message.hasPrefix("sha256:") == true,
                "\(String(describing: wrong.error))")
        let right = try await engine.run(graph(digest))
        #expect(right.state == .succeeded, "\(String(describing: right.error))")
        #expect(right.result?["results"]?[1]?["sha256"] == .string(digest))
        #expect(right.result?["results"]?[1]?["content"] == .string("resource \(n) v1"))
        // A remaker named by a reference (checked when the step runs, as the other fields).
        let remade = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)g?gz=1&size=3000"))","remaker":"${input.r}","as":"text"}"#),
                                          input: ["r": "gunzip"])
        #expect(remade.state == .succeeded && remade.result?["bytes"] == 3000, "\(String(describing: remade.error))")
        let unknown = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)h"))","remaker":"${input.r}"}"#),
                                           input: ["r": "nope"])
        #expect(unknown.error?.kind == .invalid && unknown.error?.message.contains("unknown remaker 'nope'") == true,
                "\(String(describing: unknown.error))")
        let notADigest = try await engine.run(graph("abc"))
        #expect(notADigest.error?.message.hasPrefix("sha256: expected 64 hex digits") == true,
                "\(String(describing: notADigest.error))")
    }

    /// A job whose `sha256` an intact copy lacks fetches the resource whole;
    /// content without that digest fails the job, and the good copy stays
    /// (resources.md: a failure never replaces or removes a good copy).
    @Test(arguments: ["", #"{"memoryBytes": 0}"#])
    func aJobsOtherDigestLeavesTheGoodCopy(resources: String) async throws {
        let engine = try engine(resources)
        defer { engine.shutdown() }
        let n = name()
        let good = try await engine.run(resource("/resource/\(n)"))
        let digest = try #require(good.result?["sha256"]?.stringValue)
        let other = String(repeating: "1", count: 64)
        for mode in ["use", "refresh"] {
            let failed = try await engine.run(resource("/resource/\(n)", #","mode":"\#(mode)","sha256":"\#(other)""#))
            #expect(failed.error?.kind == .invalid && failed.error?.message.hasPrefix("sha256:") == true, "\(mode)")
        }
        #expect(try await counter(engine, "res-\(n)") == 3)  // whole fetches, not revalidations
        let kept = try await engine.run(resource("/resource/\(n)", #","mode":"only","sha256":"\#(digest)","as":"text""#))
        #expect(kept.result?["source"] == (resources.isEmpty ? "memory" : "disk"), "\(String(describing: kept.error))")
        #expect(kept.result?["content"]?.stringValue == "resource \(n) v1")
        #expect(try engine.statResource(TestServer.url("/resource/\(n)"))?["sha256"] == .string(digest))
    }

    @Test func aCorruptCopyOnDiskIsFetchedAgain() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let n = name()
        let first = try await engine.run(resource("/resource/\(n)"))
        let path = state + "/" + (try #require(first.result?["path"]?.stringValue))
        var bytes = try #require(FileManager.default.contents(atPath: path))
        bytes[0] ^= 1
        try bytes.write(to: URL(fileURLWithPath: path))
        let again = try await engine.run(resource("/resource/\(n)", #","as":"text""#))
        #expect(again.result?["source"] == "network")
        #expect(again.result?["content"]?.stringValue == "resource \(n) v1")
        #expect(try await counter(engine, "res-\(n)") == 2)
    }

    @Test func theIndexInTheStateStoreOutlivesTheEngine() async throws {
        let n = name()
        do {
            let store = try SQLiteStore(directory: state)
            let engine = try engine(#"{"memoryBytes": 0}"#, index: store)
            #expect(try await engine.run(resource("/resource/\(n)")).result?["source"] == "network")
            engine.shutdown()
            store.close()
        }
        let store = try SQLiteStore(directory: state)
        defer { store.close() }
        let engine = try engine(index: store)
        defer { engine.shutdown() }
        let again = try await engine.run(resource("/resource/\(n)", #","mode":"only","as":"text""#))
        #expect(again.result?["source"] == "disk")
        #expect(again.result?["content"]?.stringValue == "resource \(n) v1")
        #expect(try store.resource(key: try #require(again.result?["key"]?.stringValue))?.url == TestServer.url("/resource/\(n)"))
        // `as json` of a body that is not JSON fails the job, kind decode.
        let json = try await engine.run(resource("/resource/\(n)", #","as":"json""#))
        #expect(json.error?.kind == .decode)
        #expect(try await counter(engine, "res-\(n)") == 1)
    }

    @Test func badSpecsNameTheirField() throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let url = TestServer.url("/resource/x")
        let cases: [(String, String)] = [
            (#"{"type":"resource","url":"\#(url)","mode":"sometimes"}"#, "mode"),
            (#"{"type":"resource","url":"\#(url)","method":"POST"}"#, "method"),
            (#"{"type":"resource","url":"\#(url)","saveAs":"x"}"#, "saveAs"),
            (#"{"type":"resource","url":"\#(url)","sha256":"abc"}"#, "sha256"),
            (#"{"type":"resource","url":"\#(url)","cipher":"rot13"}"#, "cipher"),
            (#"{"type":"resource","url":"\#(url)","cipher":"aes-gcm","as":"text"}"#, "as"),
            (#"{"type":"resource","url":"\#(url)","as":"pdf"}"#, "as"),
            (#"{"type":"resource","url":"\#(url)","remaker":"sharpen"}"#, "remaker"),
            (#"{"type":"resource","url":"\#(url)","remakeOptions":{}}"#, "remakeOptions"),
            (#"{"type":"resource","url":"ftp://x/y"}"#, "url"),
            (#"{"type":"resource","server":"nope","endpoint":"/a"}"#, "server"),
            (#"{"type":"resource","url":"\#(url)","maxAgeSec":-1}"#, "maxAgeSec"),
            // Polling and merging are a remote job's: a resource is fetched once, one transfer per key.
            (#"{"type":"resource","url":"\#(url)","repeat":{"everyMs":100,"until":{"path":"a","equals":1}}}"#, "repeat"),
            (#"{"type":"resource","url":"\#(url)","coalesce":false}"#, "coalesce"),
        ]
        for (text, field) in cases {
            let json = try JSONParser.parse(text)
            do throws(ValidationError) {
                _ = try engine.submit(json: json)
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.path == field, "\(text): \(error)")
            }
        }
        // What a resource job does anyway may be said (`only`: it ends at once, not in the repository).
        _ = try engine.submit(json: try JSONParser.parse(#"{"type":"resource","url":"\#(url)","method":"GET","mode":"only"}"#))
    }
}

/// The embedding API (resources.md §5) and the repository's upkeep.
@Suite(.ownThreads) final class ResourceEmbeddingTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-resemb-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    @Test func fetchStatReadRemovePurgeFromSwift() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"memoryBytes": 64}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let n = "e" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)")
        var options = ResourceSpec(RemoteSpec(url: url))
        options.presentation = .text
        let result = try await engine.fetchResource(url, options: options)
        #expect(result["content"]?.stringValue == "resource \(n) v1")
        #expect(try engine.resourceData(url) == Data("resource \(n) v1".utf8))
        let file = try #require(try engine.resourceFile(url))
        #expect(FileManager.default.contents(atPath: file.path) == Data("resource \(n) v1".utf8))
        #expect(try engine.statResource(url)?["url"] == .string(url))
        // Bigger than the 64-byte memory tier: served from disk, and the tier evicts by bytes.
        let big = TestServer.url("/resource/\(n)?size=100")
        #expect(try await engine.fetchResource(big)["source"] == "network")
        #expect(try await engine.fetchResource(big)["source"] == "disk")
        #expect(try await engine.fetchResource(url)["source"] == "memory")
        #expect(try await engine.removeResources(url: url)["removed"] == 1)
        #expect(try engine.resourceData(url) == nil)
        #expect(try await engine.purgeResources(maxBytes: 0) == ["removed": 1, "bytes": 100])
        do {
            _ = try await engine.fetchResource(url, options: { var o = ResourceSpec(RemoteSpec()); o.mode = .only; return o }())
            Issue.record("served")
        } catch let error as JobError {
            #expect(error.message == "not in repository")
        }
    }

    /// An embedded engine without a persistent index starts with an empty
    /// repository: what an earlier run left (copies its index no longer
    /// knows, a partial download) is removed, not left uncounted on disk.
    @Test func anEngineWithTheIndexInMemoryStartsWithAnEmptyRepository() async throws {
        let first = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        let copy = try await first.fetchResource(TestServer.url("/resource/m\(UUID().uuidString.prefix(8).lowercased())"))
        let path = state + "/" + (try #require(copy["path"]?.stringValue))
        let partial = (path as NSString).deletingLastPathComponent + "/.hydra-download-1f2e3d"
        #expect(FileManager.default.createFile(atPath: partial, contents: Data("partial".utf8)))
        _ = await first.shutdown(gracePeriod: .seconds(5))
        #expect(FileManager.default.fileExists(atPath: path))
        let second = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { second.shutdown() }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: partial))
        #expect(try second.statResource(copy["url"]!.stringValue!) == nil)
    }

    @Test func startupReconciliationMakesFilesAndIndexAgree() async throws {
        let store = try SQLiteStore(directory: state)
        defer { store.close() }
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state, resourceIndex: store)
        defer { engine.shutdown() }
        let n = "g" + UUID().uuidString.prefix(8).lowercased()
        let kept = try await engine.fetchResource(TestServer.url("/resource/\(n)a"))
        let lost = try await engine.fetchResource(TestServer.url("/resource/\(n)b"))
        let replaced = try await engine.fetchResource(TestServer.url("/resource/\(n)c"))
        let sameSize = try await engine.fetchResource(TestServer.url("/resource/\(n)d"))
        // A file the index does not know, an entry whose file went, and two whose file is
        // another one (a new copy renamed into place, the crash before its entry): of
        // another size, and of the same size (it passed for the entry's: a kill -9 audit).
        let stray = state + "/resources/ab/" + String(repeating: "ab", count: 32) + ".bin"
        try FileManager.default.createDirectory(atPath: state + "/resources/ab", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: stray, contents: Data("stray".utf8)))
        try FileManager.default.removeItem(atPath: state + "/" + lost["path"]!.stringValue!)
        try Data("a longer body than the entry says".utf8).write(to: URL(fileURLWithPath: state + "/" + replaced["path"]!.stringValue!))
        let sameSizePath = state + "/" + sameSize["path"]!.stringValue!
        let other = Data(String(repeating: "x", count: try #require(sameSize["bytes"]?.intValue)).utf8)
        try other.write(to: URL(fileURLWithPath: sameSizePath + ".new"))
        #expect(rename(sameSizePath + ".new", sameSizePath) == 0)
        let (files, entries) = try engine.resources.reconcile()
        #expect(files == 3 && entries == 3)
        #expect(try store.resource(key: sameSize["key"]!.stringValue!) == nil)
        #expect(!FileManager.default.fileExists(atPath: sameSizePath))
        #expect(!FileManager.default.fileExists(atPath: stray))
        #expect(try store.resource(key: lost["key"]!.stringValue!) == nil)
        #expect(try store.resource(key: replaced["key"]!.stringValue!) == nil)
        #expect(!FileManager.default.fileExists(atPath: state + "/" + replaced["path"]!.stringValue!))
        #expect(try store.resource(key: kept["key"]!.stringValue!) != nil)
        #expect(try engine.resources.reconcile() == (0, 0))
    }
}

/// Transfers that break (resources.md §1, issue 13 §2): nothing partial is
/// ever visible, and a good copy survives a failed refresh.
@Suite(.ownThreads) final class ResourceFaultTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-resfault-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    func files() -> [String] {
        (FileManager.default.enumerator(atPath: state + "/resources")?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".bin") || $0.contains(".hydra-download-") }
    }

    /// A `206` to a request that asked for no range is part of a body: never
    /// kept as the whole resource, even by a job that expects 206.
    @Test func aPartialAnswerIsNeverKeptAsTheResource() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        for expect in ["", #","expect":[206]"#] {
            let url = TestServer.url("/status/206?n=" + UUID().uuidString.prefix(8))
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"\#(expect)}"#))
            #expect(done.state == .failed && done.error?.kind == .http && done.error?.status == 206, "\(String(describing: done.error))")
            let only = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","mode":"only"}"#))
            #expect(only.error?.message.contains("not in repository") == true, "\(String(describing: only.error))")
        }
        #expect(files().isEmpty)
    }

    /// A repository folder replaced by a symbolic link (planted: the
    /// repository's writes never follow one) is not followed out of the state
    /// folder: a copy is not served through it, a copy found "corrupt" there
    /// is not deleted through it, and startup's reconciliation does not
    /// descend into it (it deleted unindexed copies in the link's target).
    @Test func aPlantedLinkInTheRepositoryIsNeverFollowed() async throws {
        var configuration = Configuration()
        configuration.resources.memoryBytes = 0
        let outside = NSTemporaryDirectory() + "hydra-outside-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let n = "l" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=300")
        var engine = try HydraEngine(configuration: configuration, stateDirectory: state)
        let first = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        let relative = try #require(first.result?["path"]?.stringValue, "\(String(describing: first.error))")
        let key = try #require(first.result?["key"]?.stringValue)
        let folder = state + "/resources/" + key.prefix(2)
        // The folder moves outside; a link takes its place, to a file of another size under the copy's name.
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: folder, toPath: outside + "/" + key.prefix(2))
        try FileManager.default.createSymbolicLink(atPath: folder, withDestinationPath: outside + "/" + key.prefix(2))
        let victim = outside + "/" + relative.split(separator: "/").suffix(2).joined(separator: "/")
        try Data("not the copy".utf8).write(to: URL(fileURLWithPath: victim))
        let again = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(again.result?["source"] != "disk", "served through the link: \(String(describing: again.result))")
        #expect(FileManager.default.contents(atPath: victim) == Data("not the copy".utf8), "deleted or rewritten through the link")
        engine.shutdown()

        // A new engine's startup clears what its (empty) index does not know, but not through the link.
        let unindexed = outside + "/" + key.prefix(2) + "/" + key.prefix(2) + String(repeating: "0", count: 62) + ".bin"
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: unindexed))
        engine = try HydraEngine(configuration: configuration, stateDirectory: state)
        engine.shutdown()
        #expect(FileManager.default.fileExists(atPath: unindexed), "startup removed a file through the link")
        #expect(FileManager.default.fileExists(atPath: victim))
    }

    @Test func aCutConnectionIsRetriedAndLeavesNothingPartial() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        let n = "f" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=4000&cut=first")
        let noRetry = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":1}}"#))
        #expect(noRetry.error?.kind == .network, "\(String(describing: noRetry.error))")
        #expect(files().isEmpty)
        let retried = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":2,"backoffMs":1},"as":"text"}"#))
        #expect(retried.result?["content"]?.stringValue?.count == 4000, "\(String(describing: retried.error))")
        #expect(files().count == 1)
    }

    /// A copy made in memory (remade, or kept with a cipher) is bounded by
    /// `defaults.maxBodyBytes`, like any body kept in memory, not by the
    /// repository's `resources.maxBytes`: a gzip bomb through `gunzip` stops
    /// there (it held up to a gibibyte per job). A plain copy streams to disk.
    @Test func copiesMadeInMemoryStopAtMaxBodyBytes() async throws {
        var configuration = Configuration()
        configuration.defaults.maxBodyBytes = 1 << 20
        let engine = try HydraEngine(configuration: configuration, stateDirectory: state)
        defer { engine.shutdown() }
        let n = "m" + UUID().uuidString.prefix(8).lowercased()
        let bomb = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)b?gz=1&size=2000000"))","remaker":"gunzip"}"#))
        // Too large, as a derived copy past the limit is (not invalid: nothing is wrong with it but its size).
        #expect(bomb.state == .failed && bomb.error?.kind == .tooLarge && bomb.error?.message.contains("1048576") == true,
                "\(String(describing: bomb.error))")
        let sealed = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)c?size=2000000"))","cipher":"gzip"}"#))
        #expect(sealed.error?.kind == .tooLarge && sealed.error?.message.contains("defaults.maxBodyBytes") == true, "\(String(describing: sealed.error))")
        let plain = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)p?size=2000000"))"}"#))
        #expect(plain.state == .succeeded && plain.result?["bytes"] == 2_000_000, "\(String(describing: plain.error))")
        let small = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)s?gz=1&size=500000"))","remaker":"gunzip","as":"text"}"#))
        #expect(small.result?["content"]?.stringValue?.count == 500_000, "\(String(describing: small.error))")
    }

    /// A `206` of another version (its ETag is not the one `If-Range` named: a
    /// server that ignores it) or with another total length is not spliced onto
    /// the kept bytes: the next attempt fetches the body whole.
    @Test func aResumedRangeOfAnotherVersionIsNotSpliced() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        for twist in ["changed206=1", "total206=200005"] {
            let n = "s" + UUID().uuidString.prefix(8).lowercased()
            let url = TestServer.url("/resource/\(n)?size=200000&cut=first&\(twist)")
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":3,"backoffMs":1},"as":"text"}"#))
            let text = try #require(done.result?["content"]?.stringValue, "\(twist): \(String(describing: done.error))")
            #expect(text.count == 200_000 && text.hasPrefix("resource \(n) v1"), "\(twist): \(text.count) bytes")
            #expect(!text.contains("x") && !text.contains("!"), "\(twist): bytes of another version")
            #expect(done.result?["sha256"] == .string(ResourceKey.sha256(Array(text.utf8))))
        }
    }

    /// Range resume (resources.md): a body cut halfway is completed with
    /// `Range` + `If-Range`, so the server sends each byte once.
    @Test func aCutTransferIsResumedWithARangeRequest() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        let n = "g" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=200000&cut=first")
        let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":2,"backoffMs":1},"as":"text"}"#))
        let text = try #require(done.result?["content"]?.stringValue, "\(String(describing: done.error))")
        #expect(text.count == 200_000 && text.hasPrefix("resource \(n) v1") && text.hasSuffix("..."))
        #expect(done.result?["sha256"] == .string(ResourceKey.sha256(Array(text.utf8))))
        func count(_ key: String) async throws -> Int {
            try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/count/" + key))"}"#)).result?["body"]?["count"]?.intValue ?? -1
        }
        #expect(try await count("resbytes-\(n)") == 200_000)  // half, then the other half: no byte twice
        #expect(try await count("resrange-\(n)") == 1)
        #expect(engine.resources.stats.resumed == 1)
        #expect(files().count == 1)
    }

    /// The other half of resources.md's resume rule ("and starts over
    /// otherwise"): a transfer cut by a server that does not answer
    /// `Accept-Ranges: bytes` is fetched again whole, without `Range`, and the
    /// copy is the body byte for byte, held in memory (under the spool limit)
    /// or streamed to its file (over it). Would catch a resume the server
    /// never offered (the test server answers a `Range` anyway and counts it
    /// in `resrange-`), and a whole body written after the cut attempt's bytes.
    @Test func aCutTransferWithoutAcceptRangesStartsOver() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        func count(_ key: String) async throws -> Int {
            try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/count/" + key))"}"#)).result?["body"]?["count"]?.intValue ?? -1
        }
        for size in [200_000, 3 * ResourceExecutor.spoolBytes] {
            let n = "w" + UUID().uuidString.prefix(8).lowercased()
            let url = TestServer.url("/resource/\(n)?size=\(size)&cut=first&ranges=0")
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":2,"backoffMs":1}}"#))
            let path = try #require(done.result?["path"]?.stringValue, "\(size): \(String(describing: done.error))")
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: state + "/" + path)))
            let head = Array("resource \(n) v1".utf8)
            let expected = head + Array(repeating: UInt8(ascii: "."), count: size - head.count)
            #expect(bytes == expected, "\(size): \(bytes.count) bytes")
            #expect(done.result?["bytes"] == .int(size) && done.result?["sha256"] == .string(ResourceKey.sha256(expected)))
            #expect(try await count("resrange-\(n)") == 0, "\(size): the retry sent Range")
            #expect(try await count("res-\(n)") == 2)
            #expect(try await count("resbytes-\(n)") == size / 2 + size)  // the cut half, then the whole body
        }
        #expect(engine.resources.stats.resumed == 0)
        #expect(files().count == 2)
    }

    /// A resumed attempt that times out after writing some of the rest leaves
    /// those bytes in the temporary file; the next attempt asks for the rest
    /// after the bytes it kept, so it writes there (the file cut at that
    /// point), not after the stray ones: the copy is the body, byte for byte.
    @Test func aResumeAfterATimedOutResumeKeepsTheBodyExact() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        let n = "t" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=300000&cut=stall2")
        let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","timeoutMs":1500,"retry":{"maxAttempts":3,"backoffMs":1}}"#))
        let path = try #require(done.result?["path"]?.stringValue, "\(String(describing: done.error))")
        let bytes = try #require(FileManager.default.contents(atPath: state + "/" + path))
        let expected = Array("resource \(n) v1".utf8) + Array(repeating: UInt8(ascii: "."), count: 300_000 - "resource \(n) v1".utf8.count)
        #expect(bytes.count == 300_000 && [UInt8](bytes) == expected)
        #expect(done.result?["bytes"] == 300_000 && done.result?["sha256"] == .string(ResourceKey.sha256(expected)))
        #expect(files().count == 1)
    }

    /// A 206 whose Content-Range stops short of the end (its bytes are all
    /// there, the body is not) is no completion: the next attempt fetches
    /// the whole body, and the copy is the body, byte for byte.
    @Test func aResumedRangeThatStopsShortIsNotAWholeBody() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        let n = "h" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=200000&cut=first&short206=1")
        let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","retry":{"maxAttempts":3,"backoffMs":1},"as":"text"}"#))
        let text = try #require(done.result?["content"]?.stringValue, "\(String(describing: done.error))")
        #expect(text.utf8.count == 200_000 && text.hasPrefix("resource \(n) v1"))
        #expect(done.result?["bytes"] == 200_000)
    }

    /// Content-Range checks, on the numbers a peer may send.
    @Test func aResumedRangeMustCompleteTheBody() {
        #expect(ResourceExecutor.completes("bytes 100-199/200", from: 100, received: 100))
        #expect(ResourceExecutor.completes("bytes 100-199/*", from: 100, received: 100))
        #expect(!ResourceExecutor.completes("bytes 100-149/200", from: 100, received: 50))   // short of the end
        #expect(!ResourceExecutor.completes("bytes 90-199/200", from: 100, received: 110))   // another offset
        #expect(!ResourceExecutor.completes("bytes 100-199/200", from: 100, received: 60))   // fewer bytes came
        #expect(!ResourceExecutor.completes("bytes 100-99999999999999999999/200", from: 100, received: 100))
        #expect(!ResourceExecutor.completes("bytes 100-\(Int.max)/\(Int.max)", from: 100, received: 100))
        #expect(!ResourceExecutor.completes("bytes -5-10/20", from: 100, received: 16))
        #expect(!ResourceExecutor.completes("items 100-199/200", from: 100, received: 100))
        #expect(!ResourceExecutor.completes("bytes 100/200", from: 100, received: 100))
    }

    /// A plain copy is streamed to its file as it arrives: a body over
    /// `resources.maxBytes` stops there (kind `tooLarge`) and leaves nothing;
    /// one within it is kept whole without passing through the memory tier
    /// when it is too large for it, and is then served from disk.
    @Test func aLargeCopyIsStreamedToItsFile() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"maxBytes": 3000000, "memoryBytes": 1000000}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let n = "s" + UUID().uuidString.prefix(8).lowercased()
        let tooLarge = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)x?size=4000000"))"}"#))
        #expect(tooLarge.error?.kind == .tooLarge, "\(String(describing: tooLarge.error))")
        #expect(files().isEmpty)
        let url = TestServer.url("/resource/\(n)?size=2500000")
        let fetched = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(fetched.result?["source"] == "network" && fetched.result?["bytes"] == 2_500_000, "\(String(describing: fetched.error))")
        let path = try #require(fetched.result?["path"]?.stringValue)
        let bytes = try #require(FileManager.default.contents(atPath: state + "/" + path))
        #expect(fetched.result?["sha256"] == .string(ResourceKey.sha256([UInt8](bytes))) && bytes.count == 2_500_000)
        let again = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","as":"text"}"#))
        #expect(again.result?["source"] == "disk" && again.result?["content"]?.stringValue?.count == 2_500_000)
        #expect(files().count == 1)
    }

    /// A plain copy up to ``ResourceExecutor/spoolBytes`` is received in
    /// memory and written in one piece off the loop; a larger one goes to its
    /// file from the byte that outgrows that, and a cut one's bytes so far are
    /// in the file for its `Range` resume. Either way the file, the digest and
    /// the size are the body's, byte for byte, on both sides of the boundary,
    /// for a decoded body (`Content-Encoding: gzip`) too.
    @Test func copiesOnBothSidesOfTheSpoolLimitAreTheBody() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"maxBytes": 64000000}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let limit = ResourceExecutor.spoolBytes
        let n = "p" + UUID().uuidString.prefix(8).lowercased()
        /// Fetches `path` and checks the copy against `expected`.
        func check(_ path: String, _ expected: [UInt8], _ extra: String = "") async throws {
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url(path))"\#(extra)}"#))
            let stored = try #require(done.result?["path"]?.stringValue, "\(path): \(String(describing: done.error))")
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: state + "/" + stored)))
            #expect(bytes == expected, "\(path): \(bytes.count) bytes, \(expected.count) expected")
            #expect(done.result?["bytes"] == .int(expected.count), "\(path)")
            #expect(done.result?["sha256"] == .string(ResourceKey.sha256(expected)), "\(path)")
        }
        func count(_ key: String) async throws -> Int {
            try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/count/" + key))"}"#)).result?["body"]?["count"]?.intValue ?? -1
        }
        /// The test server's body for `key`: `resource KEY v1` padded with dots to `size`.
        func body(_ key: String, _ size: Int) -> [UInt8] {
            let head = Array("resource \(key) v1".utf8)
            return head + Array(repeating: UInt8(ascii: "."), count: max(0, size - head.count))
        }
        for size in [0, 1, limit - 1, limit, limit + 1, 3 * limit] {
            try await check("/resource/\(n)-\(size)?size=\(size)", body("\(n)-\(size)", size))
        }
        // Cut halfway (before and after the limit), then resumed with Range.
        for size in [limit, 3 * limit] {
            let key = "\(n)-cut\(size)"
            try await check("/resource/\(key)?size=\(size)&cut=first", body(key, size), #","retry":{"maxAttempts":2,"backoffMs":1}"#)
            #expect(try await count("resrange-\(key)") == 1)
            #expect(try await count("resbytes-\(key)") == size)
        }
        // Decoded by curl: the declared length is the encoded one (spilled; and exactly the limit, grown to it).
        try await check("/gzip-bomb/2", [UInt8](repeating: 0, count: 2 << 20))
        try await check("/gzip-bomb/1", [UInt8](repeating: 0, count: limit))
        // No Content-Length (chunked): grown as it came; empty; exactly the limit.
        for path in ["/chunked/700", "/large/0", "/large/\(limit)"] {
            let size = path.hasPrefix("/chunked/") ? 700 * 1024 : Int(path.split(separator: "/").last!)!
            try await check(path, (0..<size).map { UInt8(truncatingIfNeeded: $0) })
        }
        #expect(files().count == 13)
    }

    /// A copy within the spool limit is received in memory: no temporary file
    /// exists while it arrives (its file is written whole once it is
    /// complete); one past the limit has its temporary file from the byte
    /// that outgrew it on.
    @Test func onlyACopyPastTheSpoolLimitHasAFileWhileItArrives() throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        func temporary() -> Bool { files().contains { $0.contains(".hydra-download-") } }
        final class Outcome: Sendable { let value = Locked<JobResult?>(nil) }
        /// Polled on this thread, not with `Task.sleep`: the file lives a fraction of a
        /// second, and a task's sleep may resume late while other tests hold the
        /// (two-thread) cooperative pool (under ThreadSanitizer it missed the window).
        /// How many polls (5 ms apart) saw a temporary file: the whole write of a
        /// complete copy (through a temporary file too) may show in one or two.
        func arriving(_ path: String) throws -> (polls: Int, result: JobResult?) {
            let outcome = Outcome()
            try engine.submit(spec(#"{"type":"resource","url":"\#(TestServer.url(path))"}"#)) { result in
                outcome.value.withLock { $0 = result }
            }
            var polls = 0
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline {
                if let result = outcome.value.withLock({ $0 }) { return (polls, result) }
                if temporary() { polls += 1 }
                usleep(5_000)
            }
            return (polls, nil)
        }
        let small = try arriving("/slow-body/300/2")  // 300 KiB over ~0.6 s
        #expect(small.result?.state == .succeeded && small.result?.result?["bytes"] == .int(300 * 1024))
        #expect(small.polls <= 2, "a file while it arrived: seen by \(small.polls) polls")
        let large = try arriving("/slow-body/1300/2")  // 1.3 MiB over ~2.6 s, the last 0.3 MiB (~0.55 s) after the limit
        #expect(large.result?.state == .succeeded && large.result?.result?["bytes"] == .int(1300 * 1024))
        #expect(large.polls >= 5, "its file from the byte past the limit on (~0.55 s): seen by \(large.polls) polls")
        #expect(!temporary() && files().count == 2)
    }

    /// A redirect the client follows itself (the request carries a credential
    /// header, which curl would send on to any host): whatever the redirect's
    /// own body left in the copy's temporary file is gone, and the copy is the
    /// final body, byte for byte, streamed (over the spool limit) or kept in
    /// memory, after a small or a large redirect body.
    @Test func aRedirectsOwnBodyNeverEndsUpInTheCopy() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"maxBytes": 64000000}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let limit = ResourceExecutor.spoolBytes
        for (pad, size) in [(3 * limit, 3 * limit), (3 * limit, 1000), (1000, 3 * limit), (limit + 1, limit)] {
            let url = TestServer.url("/redirect-to?pad=\(pad)&to=/large/\(size)")
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","headers":{"X-Api-Key":"k-12345678"}}"#))
            let stored = try #require(done.result?["path"]?.stringValue, "\(pad)/\(size): \(String(describing: done.error))")
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: state + "/" + stored)))
            let expected = (0..<size).map { UInt8(truncatingIfNeeded: $0) }
            #expect(bytes == expected, "\(pad)/\(size): \(bytes.count) bytes, first \(bytes.first.map(String.init) ?? "-")")
            #expect(done.result?["bytes"] == .int(size) && done.result?["sha256"] == .string(ResourceKey.sha256(expected)))
        }
    }

    /// Every path can point at someone else's files: a symbolic link planted
    /// where the repository's folders go is never followed, for a copy written
    /// whole from memory as for one streamed as it arrives; the job fails with
    /// kind `invalid` naming the link, and nothing lands behind it.
    @Test func aLinkPlantedInTheRepositoryIsNeverFollowed() async throws {
        let outside = NSTemporaryDirectory() + "hydra-outside-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: outside) }
        try FileManager.default.createDirectory(atPath: state + "/resources", withIntermediateDirectories: true)
        for shard in 0..<256 {
            let name = String(shard, radix: 16)
            try FileManager.default.createSymbolicLink(atPath: state + "/resources/" + (name.count == 1 ? "0" + name : name),
                                                       withDestinationPath: outside)
        }
        let engine = try HydraEngine(configuration: try Configuration(json: try JSONParser.parse(#"{"resources": {"maxBytes": 8000000}}"#)),
                                     stateDirectory: state)
        defer { engine.shutdown() }
        let n = "l" + UUID().uuidString.prefix(8).lowercased()
        for size in [1000, 3 << 20] {
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)-\(size)?size=\(size)"))"}"#))
            #expect(done.error?.kind == .invalid && done.error?.message.contains("symbolic link") == true,
                    "\(size): \(String(describing: done.error))")
            #expect(!(done.error?.message.contains(outside) ?? true) && !(done.error?.message.contains(state) ?? true))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    @Test func aFailedRefreshKeepsTheGoodCopy() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"memoryBytes": 0}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let n = "h" + UUID().uuidString.prefix(8).lowercased()
        // No validators: a refresh fetches the body again, and the server cuts it.
        let url = TestServer.url("/resource/\(n)?size=4000&cut=after1&validators=0")
        let good = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(good.result?["source"] == "network")
        for mode in ["refresh", "use"] {
            let failed = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","mode":"\#(mode)","maxAgeSec":0,"retry":{"maxAttempts":1}}"#))
            #expect(failed.error?.kind == .network, "\(mode): \(String(describing: failed.error))")
        }
        let kept = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","mode":"only","as":"text"}"#))
        #expect(kept.result?["source"] == "disk" && kept.result?["content"]?.stringValue?.count == 4000)
        #expect(files().count == 1)
    }
}

/// Remakers and gzip at rest (resources.md §1).
@Suite(.ownThreads) final class ResourceRemakerTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-resremake-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    @Test func gunzipAndSwiftRemakers() async throws {
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state)
        defer { engine.shutdown() }
        engine.resources.register(remaker: "upper") { data, options in
            let suffix = options["suffix"]?.stringValue ?? ""
            return Data((String(decoding: data, as: UTF8.self).uppercased() + suffix).utf8)
        }
        let n = "m" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?gz=1&size=500")
        let plain = String("resource \(n) v1" + String(repeating: ".", count: 500)).prefix(500)
        let unzipped = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","remaker":"gunzip","as":"text"}"#))
        #expect(unzipped.result?["content"]?.stringValue == String(plain), "\(String(describing: unzipped.error))")
        let raw = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(raw.result?["key"] != unzipped.result?["key"] && raw.result?["bytes"]?.intValue ?? 0 < 500)
        let upper = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)"))","remaker":"upper","remakeOptions":{"suffix":"!"},"as":"text"}"#))
        #expect(upper.result?["content"]?.stringValue == "RESOURCE \(n.uppercased()) V1!")
        #expect(upper.result?["source"] == "network")
        // Another options object is another resource.
        let other = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)"))","remaker":"upper","as":"text"}"#))
        #expect(other.result?["content"]?.stringValue == "RESOURCE \(n.uppercased()) V1" && other.result?["key"] != upper.result?["key"])
        // No options and `{}` are the same request: one copy.
        let empty = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)"))","remaker":"upper","remakeOptions":{}}"#))
        #expect(empty.result?["key"] == other.result?["key"] && empty.result?["source"] == "memory")
        // Content that is no longer gzip does not keep the gzip type.
        let typed = TestServer.url("/resource/\(n)?gz=1&size=500&type=application/gzip")
        let gunzipped = try await engine.run(spec(#"{"type":"resource","url":"\#(typed)","remaker":"gunzip"}"#))
        #expect(gunzipped.result?["contentType"] == "application/octet-stream", "\(gunzipped.json)")
        let kept = try await engine.run(spec(#"{"type":"resource","url":"\#(typed)"}"#))
        #expect(kept.result?["contentType"] == "application/gzip", "\(kept.json)")
        // A body that is not gzip: the job fails, nothing stored.
        let bad = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)?gz=bad"))","remaker":"gunzip"}"#))
        #expect(bad.error?.kind == .invalid && bad.error?.message.hasPrefix("remaker: gunzip failed") == true)
        let none = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/resource/\(n)?gz=bad"))","remaker":"gunzip","mode":"only"}"#))
        #expect(none.error?.message == "not in repository")
    }

    @Test func gzipAtRest() async throws {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"memoryBytes": 0}}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let n = "z" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)?size=5000")
        let first = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","cipher":"gzip","as":"text"}"#))
        #expect(first.result?["content"]?.stringValue?.count == 5000 && first.result?["path"] == nil)
        // `sha256` and `bytes` are the content's, as for a plain copy (the job's own `sha256` is checked against it).
        let digest = ResourceKey.sha256(Array((first.result?["content"]?.stringValue ?? "").utf8))
        #expect(first.result?["sha256"] == .string(digest) && first.result?["bytes"] == 5000)
        let key = try #require(first.result?["key"]?.stringValue)
        let file = try #require(FileManager.default.contents(atPath: state + "/resources/\(key.prefix(2))/\(key).bin"))
        #expect(file.count < 1000 && file.range(of: Data("resource \(n)".utf8)) == nil)
        let disk = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","cipher":"gzip","as":"base64"}"#))
        #expect(disk.result?["source"] == "disk" && Data(base64Encoded: disk.result?["content"]?.stringValue ?? "")?.count == 5000)
        #expect(disk.result?["sha256"] == .string(digest))
        // A flipped byte in the compressed file: corrupt, fetched again.
        let path = state + "/resources/\(key.prefix(2))/\(key).bin"
        var bytes = try #require(FileManager.default.contents(atPath: path))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: path))
        let again = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","cipher":"gzip","sha256":"\#(digest)"}"#))
        #expect(again.result?["source"] == "network" && again.result?["sha256"] == .string(digest), "\(String(describing: again.error))")
        #expect(try engine.resourceData(url)?.count == 5000)
        // A job that wants the copy in clear keeps its own in its place (another cipher is another copy).
        let clear = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(clear.result?["source"] == "network" && clear.result?["path"] != nil)
    }
}

/// The README's Swift example of the resource manager, compiled here, run against the test server.
@Suite(.ownThreads) struct ResourceReadmeTests {
    @Test func readmeShowsTheExampleAndItRuns() async throws {
        let root = PackageRoot.url
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let example = try String(contentsOf: root.appendingPathComponent("Tests/HydraTests/HydraResources/ResourceReadmeExample.swift"), encoding: .utf8)
        #expect(readme.contains("```swift\n" + example + "```"))
        let state = NSTemporaryDirectory() + "hydra-resreadme-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let n = "d" + UUID().uuidString.prefix(8).lowercased()
        let data = try await cachedData(from: TestServer.url("/resource/\(n)"), state: state)
        #expect(data == Data("resource \(n) v1".utf8))
    }
}

/// The purge timer (resources.md §4): past `maxBytes`, the least recently used copies go.
@Suite(.ownThreads) final class ResourceUpkeepTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-resupkeep-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    /// Three copies of 100 bytes, used in turn (distinct `lastUsedAt`): their keys.
    func fetchThree(_ engine: HydraEngine, _ name: String) async throws -> [String] {
        var keys: [String] = []
        for i in 0..<3 {
            let result = try await engine.fetchResource(TestServer.url("/resource/\(name)\(i)?size=100"))
            keys.append(result["key"]!.stringValue!)
            try await Task.sleep(for: .milliseconds(20))
        }
        return keys
    }

    /// Waits (at most `seconds`) until the copy of `key` is gone; true when it is.
    func waitGone(_ engine: HydraEngine, _ key: String, seconds: Double) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while try engine.resources.stat(key: key) != nil, Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        return try engine.resources.stat(key: key) == nil
    }

    /// An engine with `resources` settings and an event log.
    func engine(_ resources: String) throws -> (HydraEngine, EventLog) {
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": \#(resources)}"#))
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        return (engine, log)
    }

    /// The timer's own part: copies unused for `maxAgeSec` go (as nginx's `inactive`).
    @Test func theTimerEvictsCopiesUnusedForMaxAge() async throws {
        let (engine, log) = try engine(#"{"maxAgeSec": 1, "purgeIntervalSec": 1}"#)
        defer { engine.shutdown() }
        let keys = try await fetchThree(engine, "u" + UUID().uuidString.prefix(8).lowercased())
        for key in keys { #expect(try await waitGone(engine, key, seconds: 5)) }
        // The entry goes first, then the file, then the event: it may follow the last `stat` by a moment.
        func evicted() -> Int { log.all.filter { $0.name == "resource.removed" && $0.fields["reason"] == "evicted" }.count }
        let deadline = Date().addingTimeInterval(5)
        while evicted() < 3, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(evicted() == 3)
    }

    /// `maxBytes` holds as copies are stored, not only when the purge timer
    /// runs (here once an hour): the least recently used go; a removal empties
    /// the memory tiers at once, so `resource.stats` never counts memory for copies that are gone.
    @Test func aStoreEvictsPastMaxBytesAndRemovalsEmptyTheMemoryTier() async throws {
        let (engine, log) = try engine(#"{"maxBytes": 250, "purgeIntervalSec": 3600}"#)
        defer { engine.shutdown() }
        let n = "v" + UUID().uuidString.prefix(8).lowercased()
        let keys = try await fetchThree(engine, n)
        #expect(try await waitGone(engine, keys[0], seconds: 3))  // 300 bytes > 250
        #expect(try engine.resources.stat(key: keys[1]) != nil && engine.resources.stat(key: keys[2]) != nil)
        engine.bus.waitForEmits()
        #expect(log.all.contains { $0.name == "resource.removed" && $0.fields["key"] == .string(keys[0]) && $0.fields["reason"] == "evicted" })
        #expect(try engine.resources.statsJSON()["bytes"] == 200)

        // (The eviction emptied the memory tier; a hit of disk fills it again.)
        #expect(try await engine.fetchResource(TestServer.url("/resource/\(n)1?size=100"))["source"] == "disk")
        #expect(try engine.resources.statsJSON()["memoryBytes"]?.intValue ?? 0 > 0)
        let removed = try await engine.removeResources(prefix: TestServer.url("/resource/\(n)"))
        #expect(removed["removed"] == 2)
        let stats = try engine.resources.statsJSON()
        #expect(stats["count"] == 0 && stats["bytes"] == 0 && stats["memoryBytes"] == 0)
    }

    /// A resource is fetched with GET: a job through an api that sends another
    /// method is refused at submit naming `api` (it was fetched with GET, silently).
    @Test func anApiThatSendsAnotherMethodIsRefused() throws {
        let engine = try makeEngine()  // its api `echo` sends POST
        defer { engine.shutdown() }
        let refused = #expect(throws: ValidationError.self) {
            _ = try engine.prepare(spec(#"{"type":"resource","api":"echo","pathVars":{"name":"x"}}"#))
        }
        #expect(refused?.description.hasPrefix("api: api 'echo' sends POST") == true, "\(String(describing: refused))")
        _ = try engine.prepare(spec(#"{"type":"resource","api":"items"}"#))
    }
}
