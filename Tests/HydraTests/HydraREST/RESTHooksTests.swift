import Foundation
import HydraHTTP
import HydraLoop
import Testing

@testable import Hydra
@testable import HydraREST

/// Embedding hooks (rest.md §9) and dummy responses through the dogma, against the test server.
@Suite(.ownThreads) struct RESTHooksTests {
    @Test func preparersSignRequestsGloballyAndPerApi() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let threads = Locked<Set<String>>([])
        try engine.rest.addRequestPreparer { request, context in
            request.headers.append(HTTPHeader("X-Signed", "job=\(context.jobId);attempt=\(context.attempt)"))
            _ = threads.withLock { $0.insert(Thread.current.name ?? "?") }
        }
        try engine.rest.addRequestPreparer(forAPI: "echo") { request, _ in
            request.headers.append(HTTPHeader("X-Echo-Only", "yes"))
        }
        let plain = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/p"}"#))
        let headers = try #require(plain.result?["body"]?["headers"])
        #expect(headers["x-signed"] == .string("job=\(plain.jobId);attempt=1"))
        #expect(headers["x-echo-only"] == nil)
        let api = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"n"},"body":{}}"#))
        #expect(api.result?["body"]?["headers"]?["x-echo-only"] == "yes")
        #expect(api.result?["body"]?["headers"]?["x-signed"] != nil)
        // On the worker's loop thread.
        #expect(threads.withLock { $0 }.allSatisfy { $0.hasPrefix("hydra-rest") }, "\(threads.withLock { $0 })")
        // A preparer that refuses fails the job with its error.
        try engine.rest.addRequestPreparer(forAPI: "items") { _, _ throws(JobError) in
            throw JobError(.invalid, "no signing key for items")
        }
        let refused = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(refused.error?.kind == .invalid && refused.error?.message == "no signing key for items")
        #expect(throws: ValidationError.self) { try engine.rest.addRequestPreparer(forAPI: "nope") { _, _ in } }
    }

    @Test func processorsRewriteOrRejectBeforeTheDogma() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        // Unwrap `{"items": [...]}` to its array for the items api, as an envelope.
        try engine.rest.addResponseProcessor(forAPI: "items") { response, _ in
            guard let json = try? JSONParser.parse(response.body), let items = json["items"] else { return }
            response.body = JSONWriter.bytes(items)
        }
        let unwrapped = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(unwrapped.result?["body"]?.arrayValue?.count == 3)
        // A second processor in the chain sees the first one's output and may reject it.
        try engine.rest.addResponseProcessor(forAPI: "items") { response, _ throws(JobError) in
            if response.body.count > 10 { throw JobError(.decode, "too many items for this client") }
        }
        let rejected = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(rejected.error?.kind == .decode && rejected.error?.message == "too many items for this client")
        // A retryable rejection is retried like a network failure.
        let key = UUID().uuidString
        try engine.rest.addResponseProcessor { response, context throws(JobError) in
            if response.status == 200, context.attempt == 1, response.body.count < 40 {
                throw JobError(.network, "the first answer is always suspect")
            }
        }
        let retried = try await engine.run(spec(#"{"type":"remote","endpoint":"/hits/\#(key)","retry":{"maxAttempts":2,"backoffMs":1}}"#))
        #expect(retried.state == .succeeded && retried.result?["attempts"] == 2 && retried.result?["body"]?["hits"] == 2)
    }

    @Test func anErrorMapperNamesTheFailure() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        try engine.rest.setErrorMapper { response, _ in
            (try? JSONParser.parse(response.body))?["error"]?.stringValue.map { "the server says: \($0)" }
        }
        let missing = try await engine.run(spec(#"{"type":"remote","endpoint":"/nowhere"}"#))
        #expect(missing.error?.kind == .http && missing.error?.status == 404)
        #expect(missing.error?.message == "the server says: not found")
        // Per api over global; nil keeps "HTTP <status>".
        try engine.rest.setErrorMapper(forAPI: "items") { _, _ in nil }
        let engine2 = try makeEngine(#", "apis": {"gone": {"server": "testsvr", "endpoint": "/status/410"}}"#)
        defer { engine2.shutdown() }
        try engine2.rest.setErrorMapper(forAPI: "gone") { response, context in "\(context.api ?? "") answered \(response.status)" }
        let gone = try await engine2.run(spec(#"{"type":"remote","api":"gone"}"#))
        #expect(gone.error?.message == "gone answered 410")
        let plain = try await engine2.run(spec(#"{"type":"remote","endpoint":"/status/410"}"#))
        #expect(plain.error?.message == "HTTP 410")
    }

    /// rest.md §9: response processors and error mappers, like preparers, run
    /// on the loop of the worker that runs the job: with two remote workers, a
    /// job sent to `rest2` has its processor and its error mapper called on
    /// `rest2`'s loop thread, one sent to `rest` on `rest`'s. The thread is
    /// told by the loop itself (`inEventLoop`), not by its name: on Linux a
    /// thread started from a loop inherits the loop thread's name.
    /// Would catch: processors or the error mapper called on another thread (the
    /// coordinator's, a dispatch queue, a thread of their own, a Swift task,
    /// another worker's loop).
    @Test func processorsAndErrorMappersRunOnTheWorkersLoop() async throws {
        let engine = try makeEngine(#", "workers": [{"name":"local","kind":"local"},{"name":"rest","kind":"remote"},{"name":"rest2","kind":"remote"}]"#)
        defer { engine.shutdown() }
        // "processor JOBID" / "mapper JOBID" -> the workers whose loop thread it ran on.
        let threads = Locked<[String: Set<String>]>([:])
        let loops = engine.workers.map { ($0.name, $0.loop) }
        #expect(loops.map(\.0).sorted() == ["local", "rest", "rest2"])
        @Sendable func record(_ hook: String, _ context: RESTHookContext) {
            let worker = loops.first { $0.1.inEventLoop }?.0 ?? "off every worker's loop"
            threads.withLock { _ = $0["\(hook) \(context.jobId)", default: []].insert(worker) }
        }
        try engine.rest.addResponseProcessor { _, context in record("processor", context) }
        try engine.rest.setErrorMapper { _, context in
            record("mapper", context)
            return nil
        }
        for worker in ["rest", "rest2"] {
            let ok = try await engine.run(spec(#"{"type":"remote","endpoint":"/items","worker":"\#(worker)"}"#))
            #expect(ok.state == .succeeded, "\(String(describing: ok.error))")
            let failed = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/404","worker":"\#(worker)"}"#))
            #expect(failed.error?.kind == .http && failed.error?.status == 404, "\(String(describing: failed.error))")
            let seen = threads.withLock { $0 }
            #expect(seen["processor \(ok.jobId)"] == [worker], "\(seen)")
            #expect(seen["processor \(failed.jobId)"] == [worker], "\(seen)")
            #expect(seen["mapper \(failed.jobId)"] == [worker], "\(seen)")
        }
    }

    /// HJ's behaviour: a dummy response is decoded by the api's dogma like a network one.
    @Test func aDummyResponseGoesThroughTheDogma() async throws {
        let engine = try makeEngine("""
            , "apis": {"text": {"server": "testsvr", "endpoint": "/t", "dogma": "text"},
                       "json": {"server": "testsvr", "endpoint": "/j", "dogma": "json"}},
              "dummy": {"enabled": true, "responses": [
                {"server": "testsvr", "endpoint": "/t", "body": {"a": 1}},
                {"server": "testsvr", "endpoint": "/j", "body": "{not json", "headers": {"Content-Type": "application/json"}},
                {"server": "testsvr", "endpoint": "/flaky", "status": 503}]}
            """)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let text = try await engine.run(spec(#"{"type":"remote","api":"text"}"#))
        #expect(text.result?["body"] == #"{"a":1}"#)  // the text dogma saw JSON bytes
        #expect(text.result?["headers"]?["content-type"] == "application/json")
        let broken = try await engine.run(spec(#"{"type":"remote","api":"json"}"#))
        #expect(broken.error?.kind == .decode)
        try engine.rest.addResponseProcessor { response, _ in response.body = Array("processed".utf8) }
        #expect(try await engine.run(spec(#"{"type":"remote","api":"text"}"#)).result?["body"] == "processed")
        // The retry policy applies to a dummy 503, answered by the dummy each time.
        let retried = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky","retry":{"maxAttempts":3,"backoffMs":1}}"#))
        #expect(retried.error?.kind == .http && retried.error?.status == 503)
        #expect(log.names(job: retried.jobId).filter { $0.hasPrefix("job.retrying") }.count == 2)
    }
}
