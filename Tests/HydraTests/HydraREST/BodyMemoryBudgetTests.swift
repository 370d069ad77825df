import Foundation
import Testing

@testable import Hydra
@testable import HydraHTTP

/// A remote worker's memory budget for response bodies (`workers[].maxBufferedBytes`,
/// ``HTTPPoolOptions/maxBufferedBytes``): many large bodies at once are received
/// within it, one at a time past it, against the real test server.
@Suite(.ownThreads) struct BodyMemoryBudgetTests {
    /// A worker with `budget` bytes (nil: the default), and its jobs' `count` bodies of
    /// `kib` KiB each, all at once, each sent 1 KiB at a time with `pauseMs` between
    /// (so that they arrive side by side, not one after the other).
    private func fetchAll(budget: Int?, count: Int, kib: Int, pauseMs: Int = 1) async throws -> (HTTPMemoryGauge.Snapshot, [JobResult]) {
        let limit = budget.map { #", "maxBufferedBytes": \#($0)"# } ?? ""
        let engine = try makeEngine(#", "workers": [{"name": "rest", "kind": "remote", "maxHostConnections": 32\#(limit)}, {"name": "local", "kind": "local"}]"#)
        defer { engine.shutdown() }
        let specs = try (0..<count).map { i in try spec(#"{"type":"remote","endpoint":"/slow-body/\#(kib)/\#(pauseMs)?n=\#(i)","dogma":"raw"}"#) }
        var results: [JobResult] = []
        for id in try engine.submit(batch: specs, input: .null, completion: { _ in }) {
            if let result = await engine.result(of: id) { results.append(result) }
        }
        return (engine.rest.bodyMemory.snapshot, results)
    }

    @Test func manyLargeBodiesAtOnceStayWithinTheBudgetPlusOneBody() async throws {
        let kib = 256, body = 256 << 10, count = 16, budget = 1 << 20
        // Without a budget to speak of, the bodies are received side by side (what the budget is for).
        let (free, freeResults) = try await fetchAll(budget: nil, count: count, kib: kib)
        #expect(freeResults.allSatisfy { $0.state == .succeeded })
        #expect(free.peakBytes > budget + body, "the bodies were not received side by side: \(free)")
        #expect(free.waits == 0 && free.heldBytes == 0)

        let (bounded, results) = try await fetchAll(budget: budget, count: count, kib: kib)
        for result in results {
            #expect(result.state == .succeeded, "\(result.error.map { "\($0)" } ?? "")")
            let decoded = result.result?["body"]?.stringValue.flatMap { Data(base64Encoded: $0) }
            #expect(decoded?.count == body)
        }
        #expect(bounded.peakBytes <= budget + body, "\(bounded)")
        #expect(bounded.waits > 0, "no transfer waited: \(bounded)")
        #expect(bounded.heldBytes == 0, "bytes still counted after every job ended: \(bounded)")
    }

    /// One body larger than the whole budget still completes (it leads past it).
    @Test func aBodyLargerThanTheBudgetCompletes() async throws {
        let (gauge, results) = try await fetchAll(budget: 64 << 10, count: 3, kib: 1024, pauseMs: 0)
        #expect(results.count == 3 && results.allSatisfy { $0.state == .succeeded }, "\(results.map(\.state))")
        #expect(gauge.heldBytes == 0)
    }

    /// A job that times out or is cancelled while it waits for room gives its
    /// place up: the jobs after it run, and nothing stays counted.
    @Test func aJobThatEndsWhileWaitingLeavesNothingHeld() async throws {
        let engine = try makeEngine(#", "workers": [{"name": "rest", "kind": "remote", "maxBufferedBytes": 65536}, {"name": "local", "kind": "local"}]"#)
        defer { engine.shutdown() }
        // Leads past the budget for about two seconds: 200 KiB, 1 KiB every 10 ms.
        let leader = try engine.submit(spec(#"{"type":"remote","endpoint":"/slow-body/200/10","dogma":"raw"}"#))
        try await waitUntil { engine.rest.bodyMemory.snapshot.heldBytes > 65536 }
        let timesOut = try engine.submit(spec(#"{"type":"remote","endpoint":"/large/262144","dogma":"raw","timeoutMs":400}"#))
        let cancelled = try engine.submit(spec(#"{"type":"remote","endpoint":"/large/262144?c=1","dogma":"raw"}"#))
        try await waitUntil { engine.rest.bodyMemory.snapshot.waits >= 2 }
        #expect(await engine.cancel(cancelled) == .cancelled)
        let timedOut = await engine.result(of: timesOut)
        #expect(timedOut?.state == .failed && timedOut?.error?.kind == .timeout, "\(String(describing: timedOut))")
        #expect(await engine.result(of: leader)?.state == .succeeded)
        let after = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/262144?after=1","dogma":"raw"}"#))
        #expect(after.state == .succeeded)
        #expect(engine.rest.bodyMemory.snapshot.heldBytes == 0)
    }

    @Test func theBudgetIsCheckedInTheConfiguration() throws {
        for bad in ["0", "-1", "\"1\"", "1.5"] {
            #expect(throws: ValidationError.self) {
                _ = try Configuration(json: try JSONParser.parse(#"{"workers": [{"name": "rest", "kind": "remote", "maxBufferedBytes": \#(bad)}]}"#))
            }
        }
        let config = try Configuration(json: try JSONParser.parse(#"{"workers": [{"name": "rest", "kind": "remote"}]}"#))
        #expect(config.workers[0].maxBufferedBytes == 1 << 30)
    }
}
