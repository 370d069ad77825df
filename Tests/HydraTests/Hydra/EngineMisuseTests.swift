import Foundation
import Testing
import HydraLoop

@testable import Hydra
@testable import HydraCore

/// The embedding API as a careless program uses it: a shutdown from the
/// engine's own callbacks, work after the shutdown, values built in Swift that
/// a JSON spec or a configuration file could never carry, a cancelled task, an
/// engine dropped without a shutdown.
@Suite(.ownThreads) struct EngineMisuseTests {
    /// Waits (at most 20 s) until the engine refuses work: its stop has begun.
    private func waitUntilStopped(_ engine: HydraEngine) async throws {
        try await waitUntil {
            do throws(ValidationError) {
                _ = try engine.submit(.local("echo"))
                return false
            } catch {
                return error.kind == .shuttingDown
            }
        }
    }

    /// From a completion, an event sink and a job on its worker's loop, the
    /// threads `shutdown()` joins: the process stopped with "EventLoop.shutdown()
    /// called on its own thread". Now the stop runs on a thread of its own.
    @Test func aShutdownFromTheEnginesOwnThreadsStopsIt() async throws {
        let fromCompletion = try makeEngine()
        try fromCompletion.submit(.local("echo")) { _ in fromCompletion.shutdown() }
        try await waitUntilStopped(fromCompletion)

        let fromSink = try makeEngine()
        final class StoppingSink: EventSink, @unchecked Sendable {
            weak var engine: HydraEngine?
            func receive(_ event: HydraEvent) { engine?.shutdown() }
        }
        let sink = StoppingSink()
        sink.engine = fromSink
        _ = fromSink.subscribe(sink: sink)
        try fromSink.submit(.local("echo"))
        try await waitUntilStopped(fromSink)

        let fromJob = try makeEngine()
        fromJob.register(localJob: "stop", .inline { [weak fromJob] _ in fromJob?.shutdown(); return .null })
        try fromJob.submit(.local("stop"))
        try await waitUntilStopped(fromJob)
        // Its state folder is let go of once the stop is done.
        try await waitUntil { (try? StateFolderLock(folder: fromJob.stateDirectory)) != nil }
    }

    /// After `shutdown()` a submit returned an id whose completion never ran,
    /// `run` never returned and `events()` never ended.
    @Test func workAfterTheShutdownIsRefused() async throws {
        let engine = try makeEngine()
        engine.shutdown()
        let refused = #expect(throws: ValidationError.self) { try engine.submit(.local("echo")) { _ in } }
        #expect(refused?.kind == .shuttingDown)
        #expect(refused?.reason.contains("shutdown()") == true)
        await #expect(throws: ValidationError.self) { _ = try await engine.run(.local("echo")) }
        await #expect(throws: ValidationError.self) { _ = try await engine.fetchResource(TestServer.url("/resource/x")) }
        var seen = 0
        for await _ in engine.events() { seen += 1 }
        #expect(seen == 0)
        #expect(engine.scheduler.unfinishedJobs == 0)
    }

    /// Values JSON decoding refuses were taken from Swift: a negative timeout
    /// trapped the coordinator, a `maxConcurrency` of 0 started nothing, a
    /// resource job with POST and a body was sent as a GET. Each is now refused
    /// at submit with the path and the words the JSON spec gets.
    @Test func specValuesBuiltInSwiftGetTheChecksOfJSON() throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        func refusal(_ spec: JobSpec) -> ValidationError? {
            #expect(throws: ValidationError.self) { try engine.submit(spec) }
        }
        func jsonRefusal(_ text: String) -> ValidationError? {
            #expect(throws: ValidationError.self) { try engine.submit(json: try JSONParser.parse(text)) }
        }
        var timed = JobSpec.local("echo")
        timed.timeoutMs = -5
        var refused = refusal(timed)
        #expect(refused?.path == "timeoutMs" && refused?.reason == jsonRefusal(#"{"type":"local","name":"echo","timeoutMs":-5}"#)?.reason)

        refused = refusal(.serial([.concurrent([.local("echo")], maxConcurrency: 0)]))
        #expect(refused?.path == "steps[0].maxConcurrency" && refused?.reason == "must be at least 1")

        var polled = RemoteSpec.get(TestServer.url("/echo"))
        polled.repeat = RepeatSpec(everyMs: -1, path: "x", equals: 1)
        #expect(refusal(.remote(polled))?.path == "repeat.everyMs")
        polled.repeat = RepeatSpec(everyMs: 10, path: "x", equals: 1, maxTimes: .max)
        #expect(refusal(.remote(polled))?.path == "repeat.maxTimes")

        var retried = RemoteSpec.get(TestServer.url("/echo"))
        retried.retry = RetryPolicy(maxAttempts: .max, backoffMs: 0)
        refused = refusal(.remote(retried))
        #expect(refused?.path == "retry.maxAttempts" && refused?.reason == "must be at most 100")
        retried.retry = RetryPolicy(maxAttempts: 2, backoffMs: -1)
        #expect(refusal(.remote(retried))?.path == "retry.backoffMs")

        var posted = RemoteSpec(method: "POST", url: TestServer.url("/resource/x"))
        posted.body = ["a": 1]
        refused = refusal(JobSpec(.resource(ResourceSpec(posted))))
        #expect(refused?.path == "method" && refused?.reason.contains("fetched with GET") == true)
        var withBody = ResourceSpec(.get(TestServer.url("/resource/x")))
        withBody.request.body = ["a": 1]
        #expect(refusal(JobSpec(.resource(withBody)))?.path == "body")
        // Each member JSON refuses in a resource job is refused in one built in Swift,
        // under its own name (the two checks keep one list: `refusedRemoteFields`).
        let setters: [String: (inout RemoteSpec) -> Void] = [
            "method": { $0.method = "PUT" }, "body": { $0.body = ["a": 1] }, "bodyEncoding": { $0.bodyEncoding = .form },
            "dogma": { $0.dogma = "json" }, "cache": { $0.cache = CacheSpec(mode: .use, ttlSec: 5) },
            "saveAs": { $0.saveAs = "x.bin" }, "bodyFile": { $0.bodyFile = "uploads/a.bin" },
            "contentMD5": { $0.contentMD5 = true }, "gzipBody": { $0.gzipBody = true },
            "repeat": { $0.repeat = RepeatSpec(everyMs: 100, path: "a", equals: 1) }, "coalesce": { $0.coalesce = true },
        ]
        #expect(Set(setters.keys) == Set(ResourceSpec.refusedRemoteFields))
        for (name, set) in setters {
            var one = ResourceSpec(.get(TestServer.url("/resource/x")))
            set(&one.request)
            #expect(refusal(JobSpec(.resource(one)))?.path == name, "\(name)")
        }
        var lowercaseGet = ResourceSpec(.get(TestServer.url("/resource/x")))
        lowercaseGet.request.method = "get"
        #expect(throws: Never.self) { _ = try engine.prepare(JobSpec(.resource(lowercaseGet))) }  // checked, not queued
        var digest = ResourceSpec(.get(TestServer.url("/resource/x")))
        digest.sha256 = "ABC"
        #expect(refusal(JobSpec(.resource(digest)))?.path == "sha256")
        digest.sha256 = nil
        digest.maxAgeSec = -1
        #expect(refusal(JobSpec(.resource(digest)))?.path == "maxAgeSec")

        // In a batch, the path says which one.
        #expect(throws: ValidationError.self) { try engine.submit(batch: [.local("echo"), timed]) { _ in } }
        let batch = #expect(throws: ValidationError.self) { try engine.submit(batch: [.local("echo"), timed]) { _ in } }
        #expect(batch?.path == "[1].timeoutMs")
        #expect(engine.scheduler.unfinishedJobs == 0)
    }

    /// A configuration built in Swift: `maxActive` 0 hung every job, a negative
    /// dummy delay trapped a worker, 2,000 threads were started, the repository
    /// could be the state folder itself or take `hydra.lock`'s name.
    @Test func aConfigurationBuiltInSwiftGetsTheChecksOfAFile() throws {
        let state = NSTemporaryDirectory() + "hydra-misuse-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        func refusal(_ change: (inout Configuration) -> Void) -> ValidationError? {
            var config = Configuration()
            change(&config)
            return #expect(throws: ValidationError.self) { _ = try HydraEngine(configuration: config, stateDirectory: state) }
        }
        #expect(refusal { $0.workers[0].maxActive = 0 }?.path == "workers[0].maxActive")
        #expect(refusal { $0.workers[1].threads = 2000 }?.path == "workers[1].threads")
        #expect(refusal { $0.workers[1].name = "rest" }?.reason == "duplicate worker 'rest'")
        #expect(refusal { $0.workers[0].name = "" }?.path == "workers[0].name")
        #expect(refusal { $0.workers = [] }?.path == "workers")
        #expect(refusal { $0.resources.path = "" }?.path == "resources.path")
        #expect(refusal { $0.resources.path = "hydra.lock" }?.reason.contains("the server owns") == true)
        #expect(refusal { $0.resources.path = "../elsewhere" }?.path == "resources.path")
        #expect(refusal { $0.defaults.timeoutMs = 0 }?.path == "defaults.timeoutMs")
        #expect(refusal { $0.maxResultBytes = 10 }?.path == "limits.maxResultBytes")
        #expect(refusal { $0.allowEnv = ["HYDRA_SHARED_KEY"] }?.path == "allowEnv[0]")
        #expect(refusal {
            var dummy = Configuration.DummyResponse(endpoint: "/echo")
            dummy.delayMs = -5
            $0.dummy.responses = [dummy]
        }?.path == "dummy.responses[0].delayMs")
        #expect(refusal { $0.apis["a"] = Configuration.API(server: "nowhere", endpoint: "/") }?.path == "apis.a.server")
        #expect(refusal {
            var api = Configuration.API(endpoint: "/")
            api.retry = RetryPolicy(maxAttempts: 0)
            $0.apis["a"] = api
        }?.path == "apis.a.retry.maxAttempts")
        #expect(refusal { $0.defaults.retry = RetryPolicy(maxAttempts: 101) }?.path == "defaults.retry.maxAttempts")
        // Nothing was started for them, nor the folder locked.
        #expect((try? StateFolderLock(folder: state)) != nil)

        // A state folder that is a file, or empty, is said at once (it was said at the first download).
        let file = state + "-file"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let notFolder = #expect(throws: ValidationError.self) { _ = try HydraEngine(stateDirectory: file) }
        #expect(notFolder?.path == "stateDirectory" && notFolder?.reason.contains("not a folder") == true)
        #expect(throws: ValidationError.self) { _ = try HydraEngine(stateDirectory: "") }
    }

    /// An engine on a folder that did not exist yet took no lock: the next
    /// engine on it cleared the first one's copies.
    @Test func anEngineLocksAStateFolderItCreates() throws {
        let state = NSTemporaryDirectory() + "hydra-misuse-\(UUID().uuidString)/nested"
        defer { try? FileManager.default.removeItem(atPath: (state as NSString).deletingLastPathComponent) }
        let first = try HydraEngine(stateDirectory: state)
        #expect(throws: StateFolderLock.Refusal.self) { _ = try StateFolderLock(folder: state) }
        first.shutdown()
        #expect((try? StateFolderLock(folder: state, settle: .seconds(5))) != nil)
    }

    /// An engine dropped without `shutdown()` kept its threads, descriptors and
    /// state folder lock for the life of the process.
    @Test func anEngineDroppedWithoutShutdownStops() async throws {
        let state = NSTemporaryDirectory() + "hydra-misuse-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        var engine: HydraEngine? = try HydraEngine(stateDirectory: state)
        let scheduler = engine!.scheduler
        let running = try engine!.submit(.local("delay", input: ["ms": 30000]))
        #expect((try? StateFolderLock(folder: state)) == nil)
        engine = nil
        // (Settling: a child another test is spawning may share the lock until its exec.)
        #expect((try? StateFolderLock(folder: state, settle: .seconds(5))) != nil)
        #expect(scheduler.status(of: running) == nil)  // the coordinator has stopped
        #expect(throws: ValidationError.self) { try scheduler.submit(.local("echo")) }
    }

    /// Cancelling the task that awaits `run` (so `fetchResource` and a
    /// `RESTRequest`'s `send`) cancels the job; it ran to its end before.
    @Test func cancellingTheAwaitingTaskCancelsTheJob() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let started = ContinuousClock.now
        let task = Task { try await engine.run(.local("delay", input: ["ms": 30000])) }
        try await waitUntil { engine.scheduler.runningJobs == 1 }
        task.cancel()
        let result = try await task.value
        #expect(result.state == .cancelled)
        #expect(ContinuousClock.now - started < .seconds(20))

        let remote = Task { try await engine.request().url(TestServer.url("/delay/30000")).send() }
        try await waitUntil { engine.scheduler.runningJobs == 1 }
        remote.cancel()
        await #expect(throws: (any Error).self) { _ = try await remote.value }
        #expect(ContinuousClock.now - started < .seconds(40))
        try await waitUntil { engine.scheduler.unfinishedJobs == 0 }
    }

    /// The repository's Swift calls refuse what `resource.remove` and
    /// `resource.purge` refuse: no selector, a key that is no key, a negative
    /// or not-a-number age (they answered `{"removed": 0}`).
    @Test func resourceCallsRefuseTypos() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        await #expect(throws: ValidationError.self) { _ = try await engine.removeResources() }
        do {
            _ = try await engine.removeResources(key: "zz")
            Issue.record("a key that is not 64 hex digits was taken")
        } catch let error as ValidationError {
            #expect(error.path == "key")
        }
        await #expect(throws: ValidationError.self) { _ = try await engine.purgeResources(olderThanSec: .nan) }
        await #expect(throws: ValidationError.self) { _ = try await engine.purgeResources(olderThanSec: -1) }
        await #expect(throws: ValidationError.self) { _ = try await engine.purgeResources(maxBytes: -1) }
        let key = String(repeating: "AB", count: 32)
        #expect(try await engine.removeResources(key: key)["removed"] == 0)
    }
}
