import Foundation
import HydraCore
import Testing
import HydraLoop

@testable import Hydra
@testable import HydraResources
@testable import HydraStore

/// The finer rules of resources.md, each against the real test server: the
/// cipher a copy is kept with, `sha256` checks on disk and for jobs sharing a
/// transfer, the disk LRU right after a hit, Range resume without validators,
/// the memory tier's share, removals, and peers' numbers.
@Suite(.ownThreads) final class ResourceRulesTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-resrules-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: state) }

    func engine(_ resources: String = "", sharedKey: String? = nil, workers: String? = nil) throws -> HydraEngine {
        let text = """
            {"defaults": {"timeoutMs": 10000}\(resources.isEmpty ? "" : ", \"resources\": " + resources)\
            \(workers.map { ", \"workers\": " + $0 } ?? "")}
            """
        return try HydraEngine(configuration: try Configuration(json: try JSONParser.parse(text)), stateDirectory: state,
                               sharedKey: sharedKey)
    }

    func name() -> String { "q" + UUID().uuidString.prefix(8).lowercased() }

    func counter(_ engine: HydraEngine, _ key: String) async throws -> Int {
        let result = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/count/" + key))"}"#))
        return result.result?["body"]?["count"]?.intValue ?? -1
    }

    func job(_ url: String, _ extra: String = "") throws -> JobSpec {
        try spec(#"{"type":"resource","url":"\#(url)"\#(extra)}"#)
    }

    /// The body `/resource/NAME?size=N&v=V` sends.
    func body(_ name: String, version: Int = 1, size: Int = 0) -> [UInt8] {
        let text = Array("resource \(name) v\(version)".utf8)
        return text + Array(repeating: UInt8(ascii: "."), count: max(0, size - text.count))
    }

    /// An aes-gcm copy is never served to a job that keeps it otherwise (its
    /// clear content would land in the result), nor replaced by a copy kept in
    /// clear or merely compressed (a job that forgot `cipher` would undo the
    /// encryption another asked for): such a job fails naming `cipher`, even
    /// when it came while the sealed copy's transfer was under way. A clear
    /// copy is replaced by a sealed one when a job asks for that.
    @Test func anAesGCMCopyIsNeverServedNorReplacedInClear() async throws {
        let engine = try engine(sharedKey: "a passphrase of 16+ chars")
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?delay=300")
        let sealed = try job(url, #","cipher":"aes-gcm""#)
        let plain = try job(url, #","as":"text""#)
        async let first = engine.run(sealed)
        try await Task.sleep(for: .milliseconds(100))  // the sealed copy's transfer is under way
        async let second = engine.run(plain)
        let (a, b) = try await (first, second)
        #expect(a.result?["source"] == "network" && a.result?["path"] == nil && a.result?["content"] == nil, "\(a)")
        #expect(b.state == .failed && b.error?.kind == .invalid && b.error?.message.hasPrefix("cipher: this resource is kept with aes-gcm") == true,
                "\(String(describing: b.error))")
        #expect(try await engine.run(try job(url, #","cipher":"gzip""#)).error?.message.hasPrefix("cipher:") == true)
        #expect(try await counter(engine, "res-\(n)") == 1)
        let key = try #require(a.result?["key"]?.stringValue)
        #expect(try engine.resources.stat(key: key)?["path"] == nil, "still sealed")
        #expect(try await engine.run(sealed).result?["source"] == "memory")

        // The other way: a clear copy, then a sealed job seals it in its place.
        let m = name()
        let clearURL = TestServer.url("/resource/\(m)")
        let clear = try await engine.run(try job(clearURL, ""))
        let clearKey = try #require(clear.result?["key"]?.stringValue)
        #expect(try engine.resources.stat(key: clearKey)?["path"] != nil)
        #expect(try await engine.run(try job(clearURL, #","cipher":"aes-gcm""#)).result?["source"] == "network")
        #expect(try engine.resources.stat(key: clearKey)?["path"] == nil)
    }

    /// A job whose `sha256` the kept (intact) copy lacks fetches again, and
    /// content with that digest replaces the copy: a new version, not a
    /// corrupt copy (that is a file whose bytes changed on disk: see
    /// `aCorruptCopyOnDiskIsFetchedAgain`).
    @Test func aJobsSHA256ThatTheKeptCopyLacksFetchesAgain() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let n = name()
        let url = TestServer.url("/resource/\(n)?bump=1")  // each request answers the next version
        let v1 = try await engine.run(job(url))
        #expect(v1.result?["sha256"] == .string(ResourceKey.sha256(body(n, version: 1))))
        let want = ResourceKey.sha256(body(n, version: 2))
        let v2 = try await engine.run(job(url, #","sha256":"\#(want.uppercased())","as":"text""#))
        #expect(v2.result?["source"] == "network" && v2.result?["content"]?.stringValue == "resource \(n) v2", "\(v2)")
        #expect(v2.result?["sha256"] == .string(want))
        engine.bus.waitForEmits()
        #expect(!log.all.contains { $0.name == "resource.removed" })
        #expect(log.all.filter { $0.name == "resource.stored" }.count == 2)
        // Served from disk now that it matches.
        #expect(try await engine.run(job(url, #","sha256":"\#(want)""#)).result?["source"] == "disk")
    }

    /// Jobs sharing one transfer are each judged by their own `sha256`: a job
    /// without one is not failed by another's wrong digest, and the copy is kept.
    @Test func jobsSharingATransferAreJudgedByTheirOwnDigest() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?delay=300")
        let wrong = String(repeating: "0", count: 64)
        let steps = [#"{"type":"resource","url":"\#(url)","sha256":"\#(wrong)"}"#, #"{"type":"resource","url":"\#(url)","as":"text"}"#]
        let group = try await engine.run(spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#))
        let errors = try #require(group.result?["errors"]?.arrayValue)
        let results = try #require(group.result?["results"]?.arrayValue)
        #expect(errors[0]["kind"] == "invalid" && (errors[0]["message"]?.stringValue ?? "").hasPrefix("sha256:"), "\(group)")
        #expect(results[1]["content"]?.stringValue == "resource \(n) v1", "\(group)")
        #expect(try await counter(engine, "res-\(n)") == 1)
        #expect(try await engine.run(job(url)).result?["source"] == "memory")
        // Every job with a wrong digest: nothing is kept.
        let m = name()
        let only = try await engine.run(job(TestServer.url("/resource/\(m)"), #","sha256":"\#(wrong)""#))
        #expect(only.error?.kind == .invalid)
        #expect(try await engine.run(job(TestServer.url("/resource/\(m)"), #","mode":"only""#)).error?.message == "not in repository")
    }

    /// `resource.purge` orders by use including hits the index has not been told of yet.
    @Test func aPurgeRightAfterAHitKeepsTheCopyJustUsed() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let n = name()
        var keys: [String] = []
        for i in 0..<3 {
            let result = try await engine.fetchResource(TestServer.url("/resource/\(n)\(i)?size=100"))
            keys.append(try #require(result["key"]?.stringValue))
            try await Task.sleep(for: .milliseconds(20))
        }
        // The oldest copy is used again, and at once the repository is bounded to two copies.
        #expect(try await engine.fetchResource(TestServer.url("/resource/\(n)0?size=100"))["source"] == "disk")
        let purged = try await engine.purgeResources(maxBytes: 200)
        #expect(purged["removed"] == 1)
        #expect(try engine.resources.stat(key: keys[1]) == nil, "the least recently used goes")
        #expect(try engine.resources.stat(key: keys[0]) != nil && engine.resources.stat(key: keys[2]) != nil)
    }

    /// resources.md §2 `resource.purge`: "oldest-used first until both bounds
    /// hold". Three copies unused for 1 s, then three used since (the first
    /// of them stored as long ago): with `olderThanSec` doing more than
    /// `maxBytes`, the old ones go and no other; with `maxBytes` doing more,
    /// copies go in order of use until it holds. Would catch a purge that
    /// applies one bound only when both are given, stops once either holds,
    /// or ages copies by `storedAt` rather than `lastUsedAt` (README).
    @Test func aPurgeWithBothBoundsGoesUntilBothHold() async throws {
        let engine = try engine(#"{"memoryBytes": 0}"#)
        defer { engine.shutdown() }
        let n = name()
        func fetch(_ name: String) async throws -> String {
            let result = try await engine.fetchResource(TestServer.url("/resource/\(n)\(name)?size=100"))
            try await Task.sleep(for: .milliseconds(20))  // distinct times of use
            return try #require(result["key"]?.stringValue)
        }
        let old = [try await fetch("o1"), try await fetch("o2"), try await fetch("o3")]
        let reused = try await fetch("f1")
        try await Task.sleep(for: .milliseconds(3000))  // wide margins: a sanitized run is slow
        #expect(try await engine.fetchResource(TestServer.url("/resource/\(n)f1?size=100"))["source"] == "disk")
        try await Task.sleep(for: .milliseconds(20))
        let newer = [try await fetch("f2"), try await fetch("f3")]
        func kept(_ key: String) throws -> Bool { try engine.resources.stat(key: key) != nil }

        // 600 bytes; maxBytes alone would take o1 and o2; olderThanSec takes o3 too, and only those.
        let first = try await engine.purgeResources(olderThanSec: 2, maxBytes: 450)
        #expect(first == ["removed": 3, "bytes": 300], "\(first)")
        #expect(try old.allSatisfy { try !kept($0) })
        #expect(try kept(reused) && newer.allSatisfy(kept), "a copy stored 3 s ago but used since stays")
        // Nothing is old now; maxBytes takes the least recently used until it holds.
        let second = try await engine.purgeResources(olderThanSec: 2, maxBytes: 100)
        #expect(second == ["removed": 2, "bytes": 200], "\(second)")
        #expect(try !kept(reused) && !kept(newer[0]) && kept(newer[1]))
    }

    /// resources.md §4's defaults, as the configuration parses them when the
    /// config gives no `resources`, an empty one, or one setting only, and as
    /// the engine's repository takes them. Would catch a default changed (or
    /// lost when another setting is given) in any of those places.
    @Test func theResourcesSettingsDefaultToTheSpecs() throws {
        func defaults(_ r: Configuration.Resources, except: String? = nil) -> Bool {
            (r.path == "resources" || except == "path") && r.memoryBytes == 67_108_864 && r.maxBytes == 1_073_741_824
                && (r.maxAgeSec == 86_400 || except == "maxAgeSec") && r.purgeIntervalSec == 3_600
        }
        #expect(defaults(Configuration().resources))
        for text in ["{}", #"{"resources": {}}"#] {
            #expect(defaults(try Configuration(json: try JSONParser.parse(text)).resources), "\(text)")
        }
        let one = try Configuration(json: try JSONParser.parse(#"{"resources": {"maxAgeSec": 5}}"#)).resources
        #expect(defaults(one, except: "maxAgeSec") && one.maxAgeSec == 5)
        let moved = try Configuration(json: try JSONParser.parse(#"{"resources": {"path": "elsewhere"}}"#)).resources
        #expect(defaults(moved, except: "path") && moved.path == "elsewhere")
        let engine = try HydraEngine(configuration: try Configuration(json: try JSONParser.parse("{}")), stateDirectory: state)
        defer { engine.shutdown() }
        #expect(defaults(engine.resources.settings))
        #expect(engine.resources.repositoryPath.hasSuffix("/resources"))
    }

    /// resources.md: resume "when the server answered `Accept-Ranges: bytes`",
    /// with or without a validator for `If-Range`.
    @Test func aCutTransferWithoutValidatorsIsResumedToo() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?size=100000&cut=first&validators=0")
        let done = try await engine.run(job(url, #","retry":{"maxAttempts":2,"backoffMs":1},"as":"text""#))
        #expect(done.result?["content"]?.stringValue?.utf8.count == 100_000, "\(String(describing: done.error))")
        #expect(try await counter(engine, "resrange-\(n)") == 1)
        #expect(try await counter(engine, "resbytes-\(n)") == 100_000)
    }

    /// `memoryBytes` is the whole tier of the process, shared by the remote
    /// workers, not halved by a remote worker's `threads`; a copy that fits is kept.
    @Test func theMemoryTierHoldsWhatMemoryBytesSays() async throws {
        let engine = try engine(#"{"memoryBytes": 8192}"#)
        defer { engine.shutdown() }
        let url = TestServer.url("/resource/\(name())?size=5000")
        #expect(try await engine.fetchResource(url)["source"] == "network")
        #expect(try await engine.fetchResource(url)["source"] == "memory")
        #expect(engine.resources.memoryBytes.load(ordering: .relaxed) == 5000)
        let two = try self.engine(#"{"memoryBytes": 8192}"#,
                             workers: #"[{"name":"a","kind":"remote"},{"name":"b","kind":"remote"},{"name":"l","kind":"local"}]"#)
        defer { two.shutdown() }
        #expect(two.resources.memoryBytesPerExecutor == 4096)
    }

    /// Removing by key and URL of the same copy counts it once; removing by
    /// URL takes the copies remade from it too.
    @Test func removalsCountEachCopyOnceAndCoverRemadeCopies() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        engine.register(remaker: "upper") { Data(String(decoding: $0, as: UTF8.self).uppercased().utf8) }
        let url = TestServer.url("/resource/\(name())")
        let plain = try await engine.fetchResource(url)
        var options = ResourceSpec(RemoteSpec(url: url))
        options.remaker = "upper"
        options.presentation = .text
        let upper = try await engine.fetchResource(url, options: options)
        #expect(upper["content"]?.stringValue?.hasPrefix("RESOURCE ") == true)
        let removed = try await engine.removeResources(url: url, key: plain["key"]?.stringValue)
        #expect(removed["removed"] == 2, "\(removed)")
        #expect(try engine.resources.stat(key: upper["key"]!.stringValue!) == nil)
    }

    /// An embedder's remakers run on the worker's own threads (its `threads`),
    /// not on libuv's pool, where every copy is written and hashed: four slow
    /// remakers held a plain download up for as long as they ran.
    @Test func slowRemakersHoldUpNoOtherDownload() async throws {
        let engine = try engine(workers: #"[{"name":"r","kind":"remote","threads":2},{"name":"l","kind":"local"}]"#)
        defer { engine.shutdown() }
        let gate = DispatchSemaphore(value: 0)
        let entered = Locked(0)
        engine.register(remaker: "slow") { data in
            entered.withLock { $0 += 1 }
            gate.wait()
            return data
        }
        var slow: [Task<JSONValue, any Error>] = []
        for _ in 0..<6 {
            var options = ResourceSpec(RemoteSpec(url: TestServer.url("/resource/\(name())")))
            options.remaker = "slow"
            let url = try #require(options.request.url)
            slow.append(Task { try await engine.fetchResource(url, options: options) })
        }
        try await waitUntil { entered.withLock { $0 } == 2 }  // both of the worker's threads busy, four queued
        // A plain copy (written and hashed on libuv's pool) goes through meanwhile.
        let plain = try await engine.fetchResource(TestServer.url("/resource/\(name())"))
        #expect(plain["source"] == "network")
        #expect(entered.withLock { $0 } == 2)
        for _ in 0..<6 { gate.signal() }
        for task in slow { #expect(try await task.value["source"] == "network") }
    }

    /// Runs `first` and `second` (resource jobs of `/resource/NAME?QUERY`):
    /// `first` starts the transfer, `second` joins it once the server has the
    /// request (on another worker it could otherwise start first).
    func shared(_ engine: HydraEngine, _ name: String, _ query: String, _ first: String, _ second: String) async throws
        -> (JobResult, JobResult)
    {
        let url = TestServer.url("/resource/\(name)?\(query)")
        let a = try engine.submit(job(url, #","as":"text""# + first))
        let deadline = ContinuousClock.now + .seconds(20)
        while try await counter(engine, "res-\(name)") < 1 {
            try #require(ContinuousClock.now < deadline, "the first job's request never reached the server")
            try await Task.sleep(for: .milliseconds(10))
        }
        let b = try engine.submit(job(url, #","as":"text""# + second))
        return (try #require(await engine.result(of: a)), try #require(await engine.result(of: b)))
    }

    /// Jobs sharing a transfer were judged by the first one's `timeoutMs` and
    /// `retry`: a job with a short timeout waited past it, one with a long
    /// timeout failed at the first one's, one with retries got none.
    @Test func aJobSharingATransferKeepsItsOwnTimeoutAndRetries() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        // The second job's short timeout ends its wait; the transfer goes on for the first.
        var n = name()
        var (first, second) = try await shared(engine, n, "delay=1200", "", #","timeoutMs":300"#)
        #expect(first.state == .succeeded && first.result?["content"] == .string("resource \(n) v1"), "\(first)")
        #expect(second.error?.kind == .timeout, "\(second)")
        #expect(try await counter(engine, "res-\(n)") == 1)
        // The first job's short timeout is not the second's: it goes on (a new request).
        n = name()
        (first, second) = try await shared(engine, n, "delay=1200",
                                           #","timeoutMs":300,"retry":{"maxAttempts":1}"#, "")
        #expect(first.error?.kind == .timeout, "\(first)")
        #expect(second.state == .succeeded && second.result?["content"] == .string("resource \(n) v1"), "\(second)")
        #expect(try await counter(engine, "res-\(n)") == 2)
        // The second job's retries are its own: the transfer is tried again for it alone.
        n = name()
        (first, second) = try await shared(engine, n, "delay=600&status=503",
                                           #","retry":{"maxAttempts":1}"#, #","retry":{"maxAttempts":3,"backoffMs":10}"#)
        #expect(first.error?.kind == .http && second.error?.kind == .http, "\(first) \(second)")
        #expect(try await counter(engine, "res-\(n)") == 3)
        // ...and the first job's retries do not keep the second waiting past its own one attempt.
        n = name()
        let events = engine.events(EventFilter(events: [EventName.retrying]))  // (the first two: the second job never retries)
        (first, second) = try await shared(engine, n, "delay=600&status=503",
                                           #","retry":{"maxAttempts":3,"backoffMs":300}"#, #","retry":{"maxAttempts":1}"#)
        #expect(first.error?.kind == .http && second.error?.kind == .http, "\(first) \(second)")
        #expect(try await counter(engine, "res-\(n)") == 3)
        var retried: [String] = []
        for await event in events {
            retried.append(event.jobId)
            if retried.count == 2 { break }
        }
        #expect(retried == [first.jobId, first.jobId], "only the first job retried: \(retried)")
    }

    /// The same across workers: a job following another worker's transfer
    /// keeps its own timeout, and the other job's is not its own.
    @Test func aJobFollowingAnotherWorkersTransferKeepsItsOwnTimeout() async throws {
        let engine = try engine(workers: #"[{"name":"a","kind":"remote"},{"name":"b","kind":"remote"},{"name":"l","kind":"local"}]"#)
        defer { engine.shutdown() }
        var n = name()
        var (first, second) = try await shared(engine, n, "delay=1200",
                                               #","worker":"a""#, #","worker":"b","timeoutMs":300"#)
        #expect(first.state == .succeeded, "\(first)")
        #expect(second.error?.kind == .timeout, "\(second)")
        #expect(try await counter(engine, "res-\(n)") == 1)
        n = name()
        (first, second) = try await shared(engine, n, "delay=1200",
                                           #","worker":"a","timeoutMs":300,"retry":{"maxAttempts":1}"#, #","worker":"b""#)
        #expect(first.error?.kind == .timeout, "\(first)")
        #expect(second.state == .succeeded && second.result?["content"] == .string("resource \(n) v1"), "\(second)")
        #expect(try await counter(engine, "res-\(n)") == 2)
    }

    /// rest.md §1: credentials never appear in results. A copy is every job's
    /// of its URL, whatever credentials each sends, so the ones the request
    /// sent and the origin echoed back are masked before the copy is kept:
    /// `resource.read`, a later job without credentials and the file on disk
    /// held them in clear (only the first job's result was masked).
    @Test func echoedCredentialsAreMaskedInTheKeptCopy() async throws {
        let secret = "SECRET-key-\(UUID().uuidString.prefix(8))"
        let text = """
            {"defaults": {"timeoutMs": 10000}, "auth": {"key": {"type": "api-key", "header": "X-Api-Key", "value": "\(secret)"}}}
            """
        let engine = try HydraEngine(configuration: try Configuration(json: try JSONParser.parse(text)), stateDirectory: state)
        defer { engine.shutdown() }
        let url = TestServer.url("/echo/\(name())")
        let first = try await engine.run(job(url, #","auth":"key","as":"text""#))
        #expect(first.state == .succeeded, "\(first)")
        let content = first.result?["content"]?.stringValue ?? ""
        #expect(content.contains("***") && !content.contains(secret), "\(content)")
        let key = try #require(first.result?["key"]?.stringValue)
        let read = try #require(try engine.resources.read(key: key, as: .text))
        #expect(read["content"]?.stringValue?.contains(secret) == false, "\(read)")
        let later = try await engine.run(job(url, #","as":"text""#))
        #expect(later.result?["source"] != "network" && later.result?["content"]?.stringValue?.contains(secret) == false, "\(later)")
        let path = try #require(first.result?["path"]?.stringValue)
        let onDisk = try String(decoding: Data(contentsOf: URL(fileURLWithPath: state + "/" + path)), as: UTF8.self)
        #expect(!onDisk.contains(secret) && onDisk.contains("***"))
    }

    /// Peers' numbers never overflow: huge offsets and lengths read what there is.
    @Test func readsWithHugeOffsetsAndLengths() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let result = try await engine.fetchResource(TestServer.url("/resource/\(n)"))
        let key = try #require(result["key"]?.stringValue)
        let all = try #require(try engine.resources.read(key: key, as: .text, offset: 1, length: Int.max))
        #expect(all["content"]?.stringValue == "esource \(n) v1" && all["eof"] == true)
        let none = try #require(try engine.resources.read(key: key, as: .text, offset: Int.max, length: Int.max))
        #expect(none["content"] == "" && none["eof"] == true)
        let some = try #require(try engine.resources.read(key: key, as: .text, offset: -5, length: 8))
        #expect(some["content"] == "resource" && some["eof"] == false)
        let page = try #require(try engine.resources.list(prefix: nil, limit: Int.max, after: nil))
        #expect(page["resources"]?.arrayValue?.count == 1)
    }

    /// A resource transfer is a download (protocol §6): `job.progress` with
    /// `bytes` and `totalBytes`, the last one the whole body, before the final event.
    @Test func aTransferReportsProgress() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let done = try await engine.run(job(TestServer.url("/resource/\(name())?size=300000")))
        #expect(done.result?["source"] == "network")
        engine.bus.waitForEmits()
        let events = log.all.filter { $0.rootJobId == done.jobId }.map(\.name)
        let progress = log.all.filter { $0.rootJobId == done.jobId && $0.name == "job.progress" }
        #expect(progress.last?.fields["bytes"] == 300_000 && progress.last?.fields["totalBytes"] == 300_000, "\(progress)")
        #expect(events.last == "job.succeeded" && events.firstIndex(of: "job.progress").map { $0 < events.count - 1 } == true)
    }

    /// A revalidated copy (`304`) is announced like a new one: its `storedAt` moved.
    @Test func aRevalidatedCopyIsAnnounced() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let url = TestServer.url("/resource/\(name())")
        _ = try await engine.fetchResource(url)
        var refresh = ResourceSpec(RemoteSpec(url: url))
        refresh.mode = .refresh
        #expect(try await engine.fetchResource(url, options: refresh)["source"] == "revalidated")
        engine.bus.waitForEmits()
        let sources = log.all.filter { $0.name == "resource.stored" }.map { $0.fields["source"] }
        #expect(sources == ["network", "revalidated"])
    }

    /// `resources.path` is a folder inside the state folder the server does not
    /// otherwise own, and `saveAs` never reaches it, wherever it is.
    @Test func theRepositoryFolderIsCheckedAndReserved() async throws {
        for bad in [".", "./", "a/../b", "/abs", "hydra.db", "HYDRA.DB-wal/x", "clean-shutdown", ""] {
            #expect(throws: ValidationError.self, "\(bad)") {
                try Configuration(json: try JSONParser.parse(#"{"resources": {"path": "\#(bad)"}}"#))
            }
        }
        #expect(throws: ValidationError.self) {
            try Configuration(json: try JSONParser.parse(#"{"resources": {"purgeIntervalSec": 99999999999999999}}"#))
        }
        let config = try Configuration(json: try JSONParser.parse(#"{"resources": {"path": "./cache//files/"}}"#))
        #expect(config.resources.path == "cache/files")
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        for path in ["cache/files/ab/x.bin", "Cache/Files", "./cache/files/y"] {
            #expect(throws: ValidationError.self, "\(path)") {
                _ = try engine.submit(spec(#"{"type":"remote","url":"http://127.0.0.1:1/","saveAs":"\#(path)"}"#))
            }
        }
        _ = try engine.submit(spec(#"{"type":"remote","url":"http://127.0.0.1:1/","saveAs":"cache/other.bin"}"#))
        // Startup reconciliation leaves files it did not name alone.
        let folder = state + "/cache/files/ab"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: state + "/cache/files/notes.txt"))
        try Data("mine".utf8).write(to: URL(fileURLWithPath: folder + "/notes.txt"))
        try Data("stale".utf8).write(to: URL(fileURLWithPath: folder + "/ab" + String(repeating: "0", count: 62) + ".bin"))
        let removed = try engine.resources.reconcile()
        #expect(removed.files == 1)
        #expect(FileManager.default.fileExists(atPath: folder + "/notes.txt"))
        #expect(FileManager.default.fileExists(atPath: state + "/cache/files/notes.txt"))
    }

    /// A 304 that names another entity tag does not vouch for the kept bytes
    /// (RFC 9111 §4.3.4): the copy is fetched whole and keeps its own tag.
    @Test func a304WithAnotherETagDoesNotRenewTheCopy() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?lie304=1")
        let first = try await engine.run(spec(#"{"type":"resource","url":"\#(url)"}"#))
        #expect(first.result?["etag"] == .string("\"\(n)-1\""), "\(String(describing: first.error))")
        let again = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","mode":"refresh"}"#))
        #expect(again.result?["source"] == "network" && again.result?["etag"] == .string("\"\(n)-1\""),
                "\(String(describing: again.result))")
        #expect(try await counter(engine, "res304-\(n)") == 1)
        #expect(try await counter(engine, "res-\(n)") == 3)  // first, the conditional one, the whole one
    }

    /// An aes-gcm copy keeps nothing derived from its clear bytes: a job whose
    /// `sha256` does not match fails without the content's digest in its error.
    @Test func anAESGCMDigestMismatchDoesNotShowTheContentsDigest() async throws {
        let engine = try engine(sharedKey: "a passphrase of 16+ chars")
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)")
        let clearDigest = ResourceKey.sha256(Array("resource \(n) v1".utf8))
        let wrong = String(repeating: "0", count: 64)
        let failed = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","cipher":"aes-gcm","sha256":"\#(wrong)"}"#))
        #expect(failed.error?.kind == .invalid)
        #expect(failed.error?.message.contains(wrong) == true && failed.error?.message.contains(clearDigest) == false,
                "\(String(describing: failed.error))")
        // The same mismatch on a plain copy names both (nothing is secret there).
        let plain = try await engine.run(spec(#"{"type":"resource","url":"\#(url)&x=1","sha256":"\#(wrong)"}"#))
        #expect(plain.error?.message.contains(wrong) == true)
    }

    /// A repository folder that is not a folder (a file in its place): the job
    /// fails naming the repository's setting, not a field the job cannot have.
    @Test func aRepositoryFolderThatIsAFileFailsTheJobSayingSo() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let url = TestServer.url("/resource/\(name())")
        let key = engine.resources.key(forURL: url)
        try FileManager.default.createDirectory(atPath: state + "/resources", withIntermediateDirectories: true)
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: state + "/resources/\(key.prefix(2))"))
        defer { try? FileManager.default.removeItem(atPath: state + "/resources/\(key.prefix(2))") }
        let done = try await engine.run(try job(url))
        #expect(done.error?.kind == .invalid)
        #expect(done.error?.message.hasPrefix("state.path: ") == true, "\(String(describing: done.error))")
    }

    /// A copy kept for a job that expects a 404 is no answer to a job that
    /// expects 2xx (resources.md: only a response in `expect` is stored; what
    /// one job expects says nothing of another), from memory or from disk.
    @Test func aCopyKeptWithAnUnexpectedStatusIsNotServed() async throws {
        for memoryBytes in [67_108_864, 0] {
            let engine = try engine(#"{"memoryBytes": \#(memoryBytes)}"#)
            defer { engine.shutdown() }
            let n = name()
            let url = TestServer.url("/resource/\(n)?status=404")
            let kept = try await engine.run(try job(url, #","expect":[404],"as":"text""#))
            #expect(kept.state == .succeeded && kept.result?["source"] == "network", "\(kept.json)")
            let plain = try await engine.run(try job(url))
            #expect(plain.error?.kind == .http && plain.error?.status == 404, "\(plain.json)")
            let again = try await engine.run(try job(url, #","expect":[404]"#))
            #expect(again.result?["source"] == (memoryBytes > 0 ? "memory" : "disk"), "\(again.json)")
            #expect(try await counter(engine, "res-\(n)") == 2)
        }
        // Jobs sharing one transfer are each judged by their own `expect`.
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?status=404&delay=300")
        let both = try await engine.run(spec(#"{"type":"concurrent","steps":[{"type":"resource","url":"\#(url)"},{"type":"resource","url":"\#(url)","expect":[404]}]}"#))
        #expect(both.result?["errors"]?[0]?["status"] == 404 && both.result?["errors"]?[1] == .null, "\(both.json)")
        #expect(try await counter(engine, "res-\(n)") == 1)
    }

    /// A server that answers a resumed request (`Range`) with 200 and the whole
    /// body: that body is the copy (moved to the start of the file, after the
    /// kept bytes it went behind), not thrown away and fetched a third time.
    @Test func aWholeBodyInAnswerToRangeIsKept() async throws {
        let engine = try engine()
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?size=200000&cut=first&norange=1")
        let done = try await engine.run(try job(url, #","retry":{"maxAttempts":2,"backoffMs":10}"#))
        #expect(done.state == .succeeded, "\(done.json)")
        #expect(done.result?["bytes"] == 200_000)
        #expect(done.result?["sha256"] == .string(ResourceKeyDigest.sha256(body(n, size: 200_000))))
        let stored = try #require(FileManager.default.contents(atPath: state + "/" + (done.result?["path"]?.stringValue ?? "?")))
        #expect([UInt8](stored) == body(n, size: 200_000))
        #expect(try await counter(engine, "res-\(n)") == 2)
    }

    /// resources.md §1: "The job runs on a remote worker (the first one unless
    /// `worker` names another)". With a local worker listed first and two
    /// remote ones, jobs without `worker` start on the first remote one (their
    /// `job.started` says so, and they share its memory tier); one that names
    /// the second runs there (its tier is empty: served from disk). Would catch
    /// jobs spread over the remote workers, or sent to the last one.
    @Test func aResourceJobWithoutWorkerRunsOnTheFirstRemoteWorker() async throws {
        let engine = try engine(workers: #"[{"name":"l","kind":"local"},{"name":"zeta","kind":"remote"},{"name":"alpha","kind":"remote"}]"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let url = TestServer.url("/resource/\(name())")
        var ids: [String] = []
        for expected: JSONValue in ["network", "memory", "memory"] {
            let done = try await engine.run(try job(url))
            #expect(done.result?["source"] == expected, "\(done.json)")
            ids.append(done.jobId)
        }
        let named = try await engine.run(try job(url, #","worker":"alpha""#))
        #expect(named.result?["source"] == "disk", "\(named.json)")
        engine.bus.waitForEmits()
        func worker(_ id: String) -> [JSONValue?] {
            log.all.filter { $0.rootJobId == id && $0.name == "job.started" }.map { $0.fields["worker"] }
        }
        for id in ids { #expect(worker(id) == ["zeta"], "\(id)") }
        #expect(worker(named.jobId) == ["alpha"])
    }

    /// Jobs of one key on different remote workers (`worker` names them) make
    /// one transfer too: those on the other worker wait for it and are served
    /// the copy it stored; a cancelled follower ends at once.
    @Test func jobsOfOneKeyOnTwoWorkersMakeOneTransfer() async throws {
        let engine = try engine(workers: #"[{"name":"a","kind":"remote"},{"name":"b","kind":"remote"},{"name":"l","kind":"local"}]"#)
        defer { engine.shutdown() }
        let n = name()
        let url = TestServer.url("/resource/\(n)?size=3000&delay=400")
        let steps = (0..<6).map { #"{"type":"resource","url":"\#(url)","worker":"\#($0 % 2 == 0 ? "a" : "b")","as":"text"}"# }
        let fan = try await engine.run(spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#))
        #expect(fan.state == .succeeded, "\(fan.json)")
        let results = fan.result?["results"]?.arrayValue ?? []
        #expect(results.count == 6 && results.allSatisfy { $0["content"]?.stringValue == String(decoding: body(n, size: 3000), as: UTF8.self) })
        #expect(try await counter(engine, "res-\(n)") == 1)
        // Each job counted once: one transfer's job a miss, the five that waited for it misses merged
        // (not disk hits as well, for those the other worker served once its copy was stored).
        let stats = try engine.resources.statsJSON()
        #expect(stats["merged"] == 5 && stats["misses"] == 6 && stats["hits"]?["disk"] == 0 && stats["hits"]?["memory"] == 0,
                "\(stats)")

        // A follower cancelled while the other worker's transfer runs.
        let m = name()
        let slow = TestServer.url("/resource/\(m)?delay=3000")
        let first = try engine.submit(spec(#"{"type":"resource","url":"\#(slow)","worker":"a"}"#))
        try waitUntilBlocking(timeout: .seconds(20)) { (try? engine.resources.statsJSON()["misses"]) == 7 }
        let second = try engine.submit(spec(#"{"type":"resource","url":"\#(slow)","worker":"b"}"#))
        try waitUntilBlocking(timeout: .seconds(20)) { (try? engine.resources.statsJSON()["merged"]) == 6 }
        #expect(await engine.cancel(second) == .cancelled)
        #expect(await engine.result(of: second)?.state == .cancelled)
        #expect(await engine.result(of: first)?.state == .succeeded)
        #expect(try await counter(engine, "res-\(m)") == 1)

        // A network failure of the transfer is every follower's too (not a second request).
        let k = name()
        let cut = TestServer.url("/resource/\(k)?size=5000&delay=3000&cut=first")
        let owner = try engine.submit(spec(#"{"type":"resource","url":"\#(cut)","worker":"a","retry":{"maxAttempts":1}}"#))
        try waitUntilBlocking(timeout: .seconds(20)) { (try? engine.resources.statsJSON()["misses"]) == 9 }
        let follower = try engine.submit(spec(#"{"type":"resource","url":"\#(cut)","worker":"b","retry":{"maxAttempts":1}}"#))
        try waitUntilBlocking(timeout: .seconds(20)) { (try? engine.resources.statsJSON()["merged"]) == 7 }
        let ownerEnd = await engine.result(of: owner)
        let followerEnd = await engine.result(of: follower)
        #expect(ownerEnd?.error?.kind == .network && followerEnd?.error?.kind == .network, "\(String(describing: followerEnd?.json))")
        #expect(try await counter(engine, "res-\(k)") == 1)
    }
}
