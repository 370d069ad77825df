import Foundation
import Testing

@testable import Hydra

/// Merged requests (rest.md §4): identical GETs in flight share one request.
@Suite struct MergedRequestTests {
    @Test func identicalRequestsInFlightShareOne() async throws {
        let engine = try makeEngine(#", "apis": {"slow": {"server": "testsvr", "endpoint": "/hits/:k", "coalesce": true}}"#)
        defer { engine.shutdown() }
        let key = UUID().uuidString
        let job = #"{"type":"remote","api":"slow","pathVars":{"k":"\#(key)"},"query":{"ms":300}}"#
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
    }

    /// A merged job that is cancelled leaves the others waiting; a cancelled
    /// first job hands its place to the next one.
    @Test func cancellingAMergedJobLeavesTheOthers() async throws {
        let engine = try makeEngine(#", "apis": {"slow": {"server": "testsvr", "endpoint": "/hits/:k", "coalesce": true}}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let key = UUID().uuidString
        let job = try spec(#"{"type":"remote","api":"slow","pathVars":{"k":"\#(key)"},"query":{"ms":4000}}"#)
        func waitFor(_ condition: () -> Bool) {
            let deadline = Date().addingTimeInterval(20)
            while !condition() && Date() < deadline { usleep(5_000) }
        }
        let base = engine.rest.stats.merged
        let first = try engine.submit(job) { _ in }
        waitFor { log.all.contains { $0.jobId == first && $0.name == "job.started" } }
        let second = try engine.submit(job) { _ in }
        let third = try engine.submit(job) { _ in }
        waitFor { engine.rest.stats.merged - base == 2 }
        #expect(engine.rest.stats.merged - base == 2)
        _ = await engine.cancel(third)
        _ = await engine.cancel(first)
        #expect(await engine.result(of: third)?.state == .cancelled)
        let firstResult = await engine.result(of: first)
        #expect(firstResult?.state == .cancelled, "\(String(describing: firstResult?.state)) \(String(describing: firstResult?.error))")
        let survivor = await engine.result(of: second)
        #expect(survivor?.state == .succeeded, "\(String(describing: survivor?.error))")
    }
}
