import Foundation
import Testing

@testable import Hydra

/// Merged requests (rest.md §4): identical GETs in flight share one request.
@Suite(.ownThreads) struct MergedRequestTests {
    @Test func identicalRequestsInFlightShareOne() async throws {
        let engine = try makeEngine(#", "apis": {"slow": {"server": "testsvr", "endpoint": "/hits/:k", "coalesce": true}}"#)
        defer { engine.shutdown() }
        let key = UUID().uuidString
        let job = #"{"type":"remote","api":"slow","pathVars":{"k":"\#(key)"},"query":{"ms":2000}}"#
        let merged = engine.rest.stats.merged
        let results = try await withThrowingTaskGroup(of: JobResult.self) { group in
            for _ in 0..<5 { group.addTask { try await engine.run(spec(job)) } }
            return try await group.reduce(into: [JobResult]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.state == .succeeded && $0.result?["body"]?["hits"] == 1 })
        #expect(engine.rest.stats.merged - merged == 4)
        let count = try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(key)"}"#))
        #expect(count.result?["body"]?["count"] == 1)

        // The job can say otherwise: without merging, each goes to the network.
        let other = UUID().uuidString
        let separate = #"{"type":"remote","api":"slow","pathVars":{"k":"\#(other)"},"query":{"ms":100},"coalesce":false}"#
        _ = try await withThrowingTaskGroup(of: JobResult.self) { group in
            for _ in 0..<3 { group.addTask { try await engine.run(spec(separate)) } }
            return try await group.reduce(into: [JobResult]()) { $0.append($1) }
        }
        let separateCount = try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(other)"}"#))
        #expect(separateCount.result?["body"]?["count"] == 3)

        // Requests that differ in a plain header are not identical (rest.md §4): each is sent.
        let third = UUID().uuidString
        _ = try await withThrowingTaskGroup(of: JobResult.self) { group in
            for trace in ["t1", "t2", "t2"] {
                let job = #"{"type":"remote","api":"slow","pathVars":{"k":"\#(third)"},"query":{"ms":1000},"headers":{"X-Trace":"\#(trace)"}}"#
                group.addTask { try await engine.run(spec(job)) }
            }
            return try await group.reduce(into: [JobResult]()) { $0.append($1) }
        }
        let thirdCount = try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(third)"}"#))
        #expect(thirdCount.result?["body"]?["count"] == 2)
    }

    /// rest.md §4: merging is for GET only. `"coalesce": true` on a job whose
    /// method is literal and not GET is `-32602` naming `coalesce`; an api that
    /// says it with another method is a configuration error naming the key.
    @Test func coalesceIsRefusedForOtherMethods() throws {
        let engine = try makeEngine(#", "apis": {"post": {"server": "testsvr", "endpoint": "/upload", "method": "POST"}}"#)
        defer { engine.shutdown() }
        func refusal(_ json: String) -> (String, String)? { engine.refusal(json) }
        let own = refusal(#"{"type":"remote","method":"POST","endpoint":"/upload","coalesce":true}"#)
        #expect(own?.0 == "coalesce" && own?.1.contains("GET") == true, "\(String(describing: own))")
        let fromApi = refusal(#"{"type":"remote","api":"post","coalesce":true}"#)
        #expect(fromApi?.0 == "coalesce" && fromApi?.1.contains("POST") == true, "\(String(describing: fromApi))")
        let nested = refusal(#"{"type":"serial","steps":[{"type":"remote","method":"DELETE","endpoint":"/x","coalesce":true}]}"#)
        #expect(nested?.0 == "steps[0].coalesce", "\(String(describing: nested))")
        // GET, false, and a method from a reference (known only when the step runs) are accepted.
        #expect(refusal(#"{"type":"remote","method":"GET","endpoint":"/x","coalesce":true}"#) == nil)
        #expect(refusal(#"{"type":"remote","method":"POST","endpoint":"/upload","coalesce":false}"#) == nil)
        #expect(refusal(#"{"type":"remote","method":"${input.m}","endpoint":"/x","coalesce":true}"#) == nil)

        do {
            _ = try Configuration(json: try JSONParser.parse("""
                {"servers": {"s": "http://h"}, "apis": {"a": {"server": "s", "endpoint": "/", "method": "PUT", "coalesce": true}}}
                """))
            Issue.record("a non-GET api with coalesce was accepted")
        } catch {
            #expect("\(error)".contains("apis.a.coalesce") && "\(error)".contains("PUT"), "\(error)")
        }
    }

    /// A merged job that is cancelled leaves the others waiting; when the job
    /// whose request they wait for is cancelled, the next one sends its own.
    /// (The server answers after 10 minutes and the jobs would wait 20: nothing
    /// here waits for either. With 60 s, a run under ThreadSanitizer that took
    /// 135 s saw the first request answered before it was cancelled.)
    @Test func cancellingAMergedJobLeavesTheOthers() async throws {
        let engine = try makeEngine(#", "apis": {"slow": {"server": "testsvr", "endpoint": "/hits/:k", "coalesce": true}}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let job = try spec(#"{"type":"remote","api":"slow","pathVars":{"k":"\#(UUID().uuidString)"},"query":{"ms":600000},"timeoutMs":1200000}"#)
        // Waits without blocking a thread of the (small) cooperative pool the cancels need.
        func waitFor(_ condition: () -> Bool) async throws {
            let deadline = Date().addingTimeInterval(60)
            while !condition() && Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        }
        let base = engine.rest.stats
        let first = try engine.submit(job) { _ in }
        try await waitFor { log.all.contains { $0.jobId == first && $0.name == "job.started" } }
        let second = try engine.submit(job) { _ in }
        let third = try engine.submit(job) { _ in }
        try await waitFor { engine.rest.stats.merged - base.merged == 2 }
        #expect(engine.rest.stats.merged - base.merged == 2)
        #expect(engine.rest.stats.requests - base.requests == 1)

        #expect(await engine.cancel(third) == .cancelled)
        #expect(await engine.result(of: third)?.state == .cancelled)
        #expect(engine.rest.stats.requests - base.requests == 1)
        #expect(await engine.cancel(first) == .cancelled)
        try await waitFor { engine.rest.stats.requests - base.requests == 2 }
        #expect(engine.rest.stats.requests - base.requests == 2)
        #expect(await engine.cancel(second) == .cancelled)
        #expect(await engine.result(of: second)?.state == .cancelled)
    }
}
